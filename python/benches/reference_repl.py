"""The reference RLM's `LocalREPL` (Python `exec` in this process) and this package's
`LuaREPL` side by side, on the same scripted RLM run over a 10 MB context.

    pip install './python[rlms]'
    python python/benches/reference_repl.py

Both environments get the same context (a generated 10 MB log) and run the same turns,
each written in its language (look, search, answer with the `answer` table):

- setup: the environment created with the context (`context_payload`), then cleaned up;
- per turn: `execute_code` of each scripted turn, and of `x = 1`, the overhead of a
  turn that does no work (what the environment adds around the code);
- the run: the reference's `RLM` with `LocalREPL` against `LuaRLM`, the model's replies
  scripted by a local OpenAI-compatible server (tests/openai_server.py), whole runs.

Each figure is the median of several rounds, the two sides alternating; Python's
garbage collector runs between them and is off while they are timed, as `timeit` does,
so that one side's garbage is not collected on the other's time. Set
RLM_BENCH_CONTEXT_MB for another context size.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlm.core.rlm import RLM
from rlm.environments.local_repl import LocalREPL

from rlm_registry.integrations.rlms import LuaREPL, LuaRLM

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from openai_server import ScriptedServer  # noqa: E402

CONTEXT_MB = float(os.environ.get("RLM_BENCH_CONTEXT_MB", "10"))
ROUNDS = 7

# The same turns in each language: look at the context, find the errors, answer.
TURNS = {
    "python": [
        "print(len(context))\nprint(context[:200])",
        "errors = [line for line in context.split('\\n') if 'ERROR' in line]\nprint(len(errors))",
        "answer['content'] = str(len(errors))\nanswer['ready'] = True",
    ],
    "lua": [
        "print(#context)\nprint(string.sub(context, 1, 200))",
        "errors = grep(context, 'ERROR')\nprint(#errors)",
        "answer.content = tostring(#errors)\nanswer.ready = true",
    ],
}
TURN_NAMES = ["look", "search", "answer"]


def make_context(megabytes: float) -> str:
    services = ["gateway", "billing", "search", "auth", "storage"]
    lines, size, i = [], 0, 0
    while size < megabytes * 1_000_000:
        level = "ERROR" if i % 17 == 0 else "INFO"
        line = f"2026-11-27T03:{i % 60:02d}:00Z {level} {services[i % 5]} request {i} took {i % 997} ms"
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines)


def timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def make_local(context: str) -> LocalREPL:
    return LocalREPL(context_payload=context)


def make_lua(context: str) -> LuaREPL:
    return LuaREPL(context_payload=context)


SIDES: dict[str, Callable[[str], Any]] = {"python": make_local, "lua": make_lua}


def setup_and_turns(context: str) -> None:
    setup: dict[str, list[float]] = {side: [] for side in SIDES}
    turns: dict[str, list[list[float]]] = {side: [] for side in SIDES}
    empty: dict[str, list[float]] = {side: [] for side in SIDES}
    for _ in range(ROUNDS):
        for side, make in SIDES.items():
            gc.collect()
            gc.disable()
            started = time.perf_counter()
            env = make(context)
            setup[side].append(time.perf_counter() - started)
            times = []
            for code in TURNS[side]:
                started = time.perf_counter()
                result = env.execute_code(code)
                times.append(time.perf_counter() - started)
                assert not result.stderr, result.stderr
            assert result.final_answer is not None
            turns[side].append(times)
            empty[side].append(statistics.median(timed(lambda: env.execute_code("x = 1")) for _ in range(200)))
            env.cleanup()
            gc.enable()
    print(f"context: {len(context) / 1e6:.1f} MB, {context.count(chr(10)) + 1} lines; medians of {ROUNDS} rounds")
    row = "{:<28} {:>14} {:>14} {:>10}"
    print(row.format("", "LocalREPL", "LuaREPL", "Lua/Python"))

    def show(name: str, python: float, lua: float) -> None:
        print(row.format(name, fmt(python), fmt(lua), f"{lua / python:.2f}x"))

    show("setup with the context", statistics.median(setup["python"]), statistics.median(setup["lua"]))
    for index, name in enumerate(TURN_NAMES):
        show(
            f"turn: {name}",
            statistics.median(r[index] for r in turns["python"]),
            statistics.median(r[index] for r in turns["lua"]),
        )
    show("turn overhead (x = 1)", statistics.median(empty["python"]), statistics.median(empty["lua"]))


def whole_runs(context: str) -> None:
    def replies(side: str) -> list[str]:
        return [f"```repl\n{code}\n```" for code in TURNS[side]]

    def run(side: str) -> float:
        with ScriptedServer(replies(side)) as server:
            kwargs: dict[str, Any] = {
                "backend": "openai",
                "backend_kwargs": {"model_name": "scripted", "base_url": server.base_url, "api_key": "sk"},
                "max_iterations": 5,
            }
            rlm = RLM(**kwargs) if side == "python" else LuaRLM(**kwargs)
            started = time.perf_counter()
            answer = rlm.completion(context, root_prompt="How many errors?").response
            elapsed = time.perf_counter() - started
        assert answer == str(sum(1 for line in context.split("\n") if "ERROR" in line)), answer
        return elapsed

    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    for _ in range(ROUNDS):
        for side in SIDES:
            gc.collect()
            gc.disable()
            seconds[side].append(run(side))
            gc.enable()
    python, lua = (statistics.median(seconds[side]) for side in SIDES)
    print(
        f"whole scripted run (3 turns, model replies from a local server): RLM with LocalREPL "
        f"{fmt(python)}, LuaRLM {fmt(lua)}, ratio {lua / python:.2f}x"
    )


def fmt(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


if __name__ == "__main__":
    text = make_context(CONTEXT_MB)
    setup_and_turns(text)
    whole_runs(text)
