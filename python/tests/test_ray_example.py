"""examples/ray: an eval's tasks answered by Ray actors on a local cluster of 2 CPUs,
against the scripted server, write what one process writes; the call cache the driver
names is the actors' too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from openai_server import ScriptedServer
from optional import require_package
from redis_server import redis_server

require_package("ray")

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ray" / "rlm_eval_ray.py"

# Every task's one turn: the code word in the context, checked by a sub-call; the same
# Lua for every task, so the answers do not depend on which actor asks first. The
# contexts differ in length, so that no two tasks send the same request (the prompt
# describes a context by its size).
REPLY = (
    "```lua\n"
    "local word = context:match('code word is (%w+)') or 'none'\n"
    "local checked = llm_query('spell ' .. word)\n"
    "FINAL(checked)\n"
    "```"
)

TASKS = [
    {"id": "t1", "question": "The code word?", "context": "The code word is amber.", "answer": "AMBER"},
    {"id": "t2", "question": "The code word?", "context": "The code word is birch.", "answer": "birch."},
    {"id": "t3", "question": "The code word?", "context": "The code word is cypress.", "answer": "oak"},
    {"id": "t4", "question": "The code word?", "context_file": "t4.txt", "answer": "delta", "scorer": "contains"},
    {"id": "t5", "question": "How many?", "context": "The code word is 12.", "answer": "14", "scorer": "numeric"},
]


def write_tasks(folder: Path) -> Path:
    (folder / "t4.txt").write_text("Notes. The code word is delta, said the file.")
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(task) + "\n" for task in TASKS))
    return path


def clean_environment() -> dict[str, str]:
    """This process's environment less any model or cache setting of the shell's."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("RLM_", "OPENAI_"))}


def run_example(server: ScriptedServer, tasks: Path, out: Path, *flags: str) -> None:
    finished = subprocess.run(
        [sys.executable, str(SCRIPT), "--tasks", str(tasks), "--out", str(out),
         "--base-url", server.base_url, "--model", "scripted", "--max-iterations", "2", *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_environment() | {"RLM_API_KEY": "sk-test"},
    )
    assert finished.returncode == 0, finished.stderr[-3000:]


def results(out: Path) -> list[dict]:
    """The records, less what differs from run to run (times)."""
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for record in records:
        del record["seconds"]
    return records


def test_ray_actors_write_the_results_one_process_writes_through_one_shared_cache(tmp_path: Path):
    tasks = write_tasks(tmp_path)
    cache = tmp_path / "shared-cache.sqlite"
    replies = [REPLY] * 2 * len(TASKS)
    with ScriptedServer(replies, sub_answer=lambda prompt: prompt.removeprefix("spell ")) as server:
        run_example(server, tasks, tmp_path / "ray-out", "--actors", "2", "--num-cpus", "2",
                    "--cache", str(cache))
        sent_by_the_cluster = len(server.requests)
        run_example(server, tasks, tmp_path / "local-out", "--local")
        sent_by_one_process = len(server.requests) - sent_by_the_cluster
        run_example(server, tasks, tmp_path / "cached-out", "--local", "--cache", str(cache))
        sent_with_the_cache = len(server.requests) - sent_by_the_cluster - sent_by_one_process

    # Every task's turn and sub-call reached the server once from the actors, as from
    # one process; the results are the same, line for line, in the task file's order.
    assert sent_by_the_cluster == sent_by_one_process == 2 * len(TASKS)
    on_ray, here = results(tmp_path / "ray-out"), results(tmp_path / "local-out")
    assert on_ray == here
    # The cache the actors filled answers a later run: nothing sent, the same answers.
    assert sent_with_the_cache == 0
    cached = results(tmp_path / "cached-out")
    assert [(r["answer"], r["score"]) for r in cached] == [(r["answer"], r["score"]) for r in on_ray]
    assert [r["id"] for r in on_ray] == ["t1", "t2", "t3", "t4", "t5"]
    assert [r["answer"] for r in on_ray] == ["amber", "birch", "cypress", "delta", "12"]
    assert [r["score"] for r in on_ray] == [1.0, 1.0, 0.0, 1.0, 0.5625]
    assert all(r["error"] is None and r["model_calls"] == 2 for r in on_ray)
    summary = (tmp_path / "ray-out" / "summary.md").read_text()
    assert "| rlm | 5 | 0.713 | 0 | 10 |" in summary


def test_ray_actors_share_a_redis_cache_that_a_later_run_reads(tmp_path: Path):
    tasks = write_tasks(tmp_path)
    with redis_server() as cache, ScriptedServer(
        [REPLY] * len(TASKS), sub_answer=lambda prompt: prompt.removeprefix("spell ")
    ) as server:
        run_example(server, tasks, tmp_path / "ray-out", "--actors", "2", "--num-cpus", "2",
                    "--cache", cache)
        sent_by_the_cluster = len(server.requests)
        run_example(server, tasks, tmp_path / "again", "--local", "--cache", cache)
        sent_again = len(server.requests) - sent_by_the_cluster

    assert sent_by_the_cluster == 2 * len(TASKS)
    assert sent_again == 0
    answers = [(r["answer"], r["score"]) for r in results(tmp_path / "ray-out")]
    assert answers == [(r["answer"], r["score"]) for r in results(tmp_path / "again")]
    assert answers[0] == ("amber", 1.0)


def test_a_task_whose_run_fails_is_scored_zero_with_its_error(tmp_path: Path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASKS[0]) + "\n")
    with ScriptedServer(["```lua\nerror('no luck')\n```"] * 2) as server:
        run_example(server, tasks, tmp_path / "out", "--local", "--max-iterations", "1")
    (record,) = results(tmp_path / "out")
    assert record["score"] == 0.0 and record["answer"] == ""
    assert record["error"]


def test_a_line_that_is_not_a_task_stops_the_run_naming_it(tmp_path: Path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASKS[0]) + "\n" + '{"id": "t2"}\n')
    finished = subprocess.run(
        [sys.executable, str(SCRIPT), "--tasks", str(tasks), "--out", str(tmp_path / "o"), "--local"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_environment(),
    )
    assert finished.returncode != 0
    assert "tasks.jsonl:2: not a task: `question` is missing" in finished.stderr
