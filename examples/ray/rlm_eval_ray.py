"""Runs an eval's tasks on a Ray cluster: actors holding the registry answer one task
each with `rlm_registry.ask`, every model call through one shared call cache, and the
results are written as one process would write them.

    python examples/ray/rlm_eval_ray.py --tasks tasks.jsonl --out ray-out \\
        --base-url http://localhost:8000/v1 --model qwen3-8b \\
        --cache redis://cache.internal:6379/0 --actors 8

The task file is the one `rlm eval --tasks` reads (`rlm eval generate` writes one):
a JSON object a line with `id`, `question`, `answer`, `scorer` and the context inline
(`context`, with `"corpus": true` for JSONL records) or in a file (`context_file`,
relative to the task file). `--local` answers the same tasks in this process, without
Ray: the results are the same, times aside. See README.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from collections.abc import Iterable
from typing import Any

import rlm_registry

# What the driver's settings are passed to the actors as: every variable `ask` reads,
# so a worker on another machine runs with the driver's model, server and cache.
FORWARDED_PREFIXES = ("RLM_", "OPENAI_")


def read_tasks(path: pathlib.Path) -> list[dict[str, Any]]:
    """The tasks of a task file, each with `base`, the folder its `context_file` is
    relative to; a line that is not a task stops the run with its line number."""
    tasks = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            task = json.loads(line)
            for field in ("id", "question", "answer"):
                if not isinstance(task.get(field), str):
                    raise ValueError(f"`{field}` is missing or not a string")
        except ValueError as error:
            raise SystemExit(f"{path}:{number}: not a task: {error}") from None
        task["base"] = str(path.parent.resolve())
        tasks.append(task)
    ids = [task["id"] for task in tasks]
    if len(set(ids)) != len(ids):
        raise SystemExit(f"{path}: task ids must be unique")
    return tasks


def task_context(task: dict[str, Any]) -> Any:
    """The context as `ask` takes it: a file or folder is a path (gathered as
    `--context` gathers it), inline JSONL records a dict of documents, else the text."""
    if "context_file" in task:
        return pathlib.Path(task["base"], task["context_file"])
    text = task.get("context", "")
    if task.get("corpus"):
        records = (json.loads(line) for line in text.splitlines() if line.strip())
        return {record["docid"]: record["text"] for record in records}
    return text


class Solver:
    """Answers tasks with the RLM loop. The registry is loaded once per actor and each
    task's run makes its own sandboxed environment from it, so an actor holds no state
    from one task to the next."""

    def __init__(self, max_iterations: int) -> None:
        self.registry = rlm_registry.Registry()
        self.max_iterations = max_iterations

    def solve(self, task: dict[str, Any]) -> dict[str, Any]:
        """One line of `results.jsonl`: the fields `rlm eval` writes for the `rlm`
        method (a failed run is scored 0 with its error)."""
        started = time.monotonic()
        record: dict[str, Any] = {
            "id": task["id"],
            "family": task.get("family", "custom"),
            "size": task.get("size"),
            "method": "rlm",
            "expected": task["answer"],
        }
        try:
            answer = rlm_registry.ask(
                task["question"],
                task_context(task),
                registry=self.registry,
                max_iterations=self.max_iterations,
                schema=task.get("schema"),
            )
        except rlm_registry.RlmRegistryError as error:
            return record | {
                "score": 0.0,
                "answer": "",
                "error": str(error),
                "seconds": time.monotonic() - started,
            }
        return record | {
            "score": rlm_registry.score(
                answer.answer, task["answer"], task.get("scorer", "exact")
            ),
            "answer": answer.answer,
            "turns": answer.turns,
            "tokens": {
                "prompt": answer.prompt_tokens,
                "completion": answer.completion_tokens,
            },
            "model_calls": answer.llm_calls,
            "cost": answer.cost,
            "error": None,
            "seconds": time.monotonic() - started,
        }


def solve_here(tasks: list[dict[str, Any]], max_iterations: int) -> list[dict[str, Any]]:
    """Every task in this process, one after the other: what the cluster must match."""
    solver = Solver(max_iterations)
    return [solver.solve(task) for task in tasks]


def solve_on_ray(
    tasks: list[dict[str, Any]],
    max_iterations: int,
    actors: int,
    address: str | None,
    num_cpus: int | None,
) -> list[dict[str, Any]]:
    """Every task on the cluster at `address` (a new local one when `None`), spread over
    `actors` actors, each given the driver's `RLM_*` and `OPENAI_*` settings."""
    import ray
    from ray.util import ActorPool

    settings = {
        name: value for name, value in os.environ.items() if name.startswith(FORWARDED_PREFIXES)
    }
    ray.init(
        address=address,
        num_cpus=num_cpus if address is None else None,
        runtime_env={"env_vars": settings},
        log_to_driver=False,
    )
    try:
        remote_solver = ray.remote(num_cpus=1)(Solver)
        pool = ActorPool([remote_solver.remote(max_iterations) for _ in range(actors)])
        return list(pool.map_unordered(lambda actor, task: actor.solve.remote(task), tasks))
    finally:
        ray.shutdown()


def write_results(out: pathlib.Path, tasks: list[dict[str, Any]], results: Iterable[dict]) -> str:
    """`results.jsonl` in the task file's order, and `summary.md`, which is returned."""
    out.mkdir(parents=True, exist_ok=True)
    by_id = {result["id"]: result for result in results}
    ordered = [by_id[task["id"]] for task in tasks]
    with open(out / "results.jsonl", "w", encoding="utf-8") as file:
        for result in ordered:
            file.write(json.dumps(result, sort_keys=True) + "\n")
    scores = [result["score"] for result in ordered]
    failed = sum(result["error"] is not None for result in ordered)
    mean = sum(scores) / len(scores) if scores else 0.0
    summary = (
        "| method | tasks | mean score | failed | model calls |\n"
        "|---|---|---|---|---|\n"
        f"| rlm | {len(ordered)} | {mean:.3f} | {failed} | "
        f"{sum(result.get('model_calls', 0) for result in ordered)} |\n"
    )
    (out / "summary.md").write_text(summary, encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=pathlib.Path, required=True, help="a task file (JSONL)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="where results go")
    parser.add_argument("--actors", type=int, default=2, help="actors answering at once")
    parser.add_argument("--address", help="an existing cluster's address (default: a new local one)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of the new local cluster")
    parser.add_argument("--local", action="store_true", help="answer in this process, no Ray")
    parser.add_argument("--max-iterations", type=int, default=10)
    parser.add_argument("--model", help="sets RLM_MODEL")
    parser.add_argument("--base-url", help="sets RLM_BASE_URL")
    parser.add_argument("--cache", help="sets RLM_CACHE: redis://host:port/db or a shared file")
    args = parser.parse_args(argv)
    for flag, variable in (("model", "RLM_MODEL"), ("base_url", "RLM_BASE_URL"), ("cache", "RLM_CACHE")):
        if getattr(args, flag) is not None:
            os.environ[variable] = getattr(args, flag)
    if args.actors < 1:
        parser.error("--actors must be at least 1")

    tasks = read_tasks(args.tasks)
    if args.local:
        results = solve_here(tasks, args.max_iterations)
    else:
        results = solve_on_ray(tasks, args.max_iterations, args.actors, args.address, args.num_cpus)
    sys.stdout.write(write_results(args.out, tasks, results))


if __name__ == "__main__":
    main()
