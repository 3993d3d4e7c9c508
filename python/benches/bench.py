"""The Python package's speed targets, each measured side by side in one run.

    pip install ./python        # or: bash .ci/test, then target/python-venv/bin/python
    python python/benches/bench.py [creation] [round_trip] [context] [threads] [thousand]
        [arming] [async] [episodes]

- creation: `Environment()` from Python against the same environment created in Rust,
  in this process (`benches/environment.rs`'s figure): target within 2x;
- round_trip: `env.execute("")` from Python: target <= 10 us (and `x = 1` beside it);
- context: a 100 MB `str` handed to an environment against one `bytes(...)` copy of
  it: target <= 2x, and no copy per `execute` after;
- threads: 8 environments in 8 threads running a CPU-bound Lua loop against the same 8
  executions in one thread: target >= 1.7x on 2 cores (the GIL is released);
- thousand: 1,000 environments alive in one process, each kept as a new user would:
  creation <= 300 us with 1,000 alive, threads bounded (not one per environment), <= 2 MB
  each; and each one answering;
- arming: executions just short of the first limits check (1,000 instructions, no
  system call) and just past it (the limits' timer armed and disarmed), alternating:
  what arming costs, and what the count hook costs before it;
- async: 1,000 `execute_async` calls on 1,000 environments gathered on one event loop
  beside the same 1,000 `execute` calls one after the other: total and per call, and
  the threads seen (the pool is bounded, not one thread per environment);
- episodes: scripted three-turn RLM episodes (`ask`) against a local server answering
  at once (tests/openai_server.py, in this process): episodes per second, and per
  second of processor time (per core; the server's share included).

Each figure is the median of several rounds, the two sides alternating. Set
RLM_BENCH_CONTEXT_MB for a smaller context.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable

from rlm_registry import Environment, _native


def median_of(rounds: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(rounds))


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def creation() -> None:
    count = 500
    python, closed, rust = [], [], []
    for _ in range(7):

        def create() -> None:
            for _ in range(count):
                Environment()

        def create_and_close() -> None:
            for _ in range(count):
                Environment().close()

        python.append(timed(create) / count)
        closed.append(timed(create_and_close) / count)
        rust.append(_native._environment_new_in_rust(count))
    python_us, closed_us, rust_us = (statistics.median(s) * 1e6 for s in (python, closed, rust))
    print(
        f"new environment: Python {python_us:.1f} us (dropped in the background), "
        f"{closed_us:.1f} us with close(); Rust {rust_us:.1f} us (new + drop); "
        f"ratio {python_us / rust_us:.2f}x, with close() {closed_us / rust_us:.2f}x (target <= 2x)"
    )


def round_trip() -> None:
    env = Environment()
    count = 20_000

    def run(code: str) -> float:
        return timed(lambda: [env.execute(code) for _ in range(count)]) / count

    run("")  # warm up
    empty, assignment = (median_of(7, lambda: run(code)) * 1e6 for code in ("", "x = 1"))
    # The share of the round trip that is the crate's own execution, timed inside the
    # call.
    inside = statistics.median(env.execute("").seconds for _ in range(count)) * 1e6
    print(
        f"execute('') round trip: {empty:.1f} us, of which the execution "
        f"{inside:.1f} us (target <= 10 us); execute('x = 1'): {assignment:.1f} us"
    )


def context() -> None:
    megabytes = int(os.environ.get("RLM_BENCH_CONTEXT_MB", "100"))
    line = "2026-11-25 12:00:00 INFO gateway request served in 12 ms\n"
    text = line * (megabytes * 1024 * 1024 // len(line))
    handed, copied = [], []
    for _ in range(5):
        env = Environment(memory_limit_mb=4 * megabytes + 64)
        handed.append(timed(lambda: env.set_context(text)))
        env.close()
        copy: list[bytes] = []
        copied.append(timed(lambda: copy.append(bytes(text, "utf-8"))))
        copy.clear()
    hand_ms, copy_ms = statistics.median(handed) * 1e3, statistics.median(copied) * 1e3
    print(
        f"{megabytes} MB str context: handed to an environment {hand_ms:.1f} ms, "
        f"one bytes(...) copy {copy_ms:.1f} ms, ratio {hand_ms / copy_ms:.2f}x (target <= 2x)"
    )
    # A str that is not ASCII is encoded to UTF-8 once (Python keeps the encoding).
    first, again = [], []
    for _ in range(3):
        accented = text[:-2] + "é\n"
        env = Environment(memory_limit_mb=4 * megabytes + 64)
        first.append(timed(lambda: env.set_context(accented)))
        again.append(timed(lambda: env.set_context(accented)))
        env.close()
    print(
        f"{megabytes} MB str context, not ASCII: {statistics.median(first) * 1e3:.1f} ms "
        f"the first time (UTF-8 encoding included), {statistics.median(again) * 1e3:.1f} ms after"
    )
    with_context = Environment(text, memory_limit_mb=4 * megabytes + 64)
    without = Environment("x")
    count = 2_000

    def run(env: Environment) -> float:
        return timed(lambda: [env.execute("n = #context") for _ in range(count)]) / count

    large = median_of(5, lambda: run(with_context)) * 1e6
    none = median_of(5, lambda: run(without)) * 1e6
    print(
        f"execute('n = #context'): {large:.1f} us with the {megabytes} MB context, "
        f"{none:.1f} us with a 1-byte one (no copy per execute)"
    )


def threads() -> None:
    workers = 8
    loop = "local x = 0 for i = 1, {n} do x = x + i % 7 end"
    probe = Environment()
    # About 0.2 s of Lua per execution on this machine.
    n = 1_000_000
    while probe.execute(loop.format(n=n)).seconds < 0.2:
        n *= 2
    code = loop.format(n=n)
    environments = [Environment() for _ in range(workers)]

    def one_thread() -> float:
        return timed(lambda: [env.execute(code) for env in environments])

    def many_threads() -> float:
        barrier = threading.Barrier(workers + 1)

        def run(env: Environment) -> None:
            barrier.wait()
            env.execute(code)

        pool = [threading.Thread(target=run, args=(env,)) for env in environments]
        for thread in pool:
            thread.start()
        started = time.perf_counter()
        barrier.wait()
        for thread in pool:
            thread.join()
        return time.perf_counter() - started

    sequential, parallel, busy = [], [], []
    for _ in range(3):
        sequential.append(one_thread())
        cpu = time.process_time()
        parallel.append(many_threads())
        # Processor time over wall time: the cores this process kept busy (other
        # programs on the machine take the rest).
        busy.append((time.process_time() - cpu) / parallel[-1])
    one, many = statistics.median(sequential), statistics.median(parallel)
    print(
        f"{workers} CPU-bound executions: one thread {one:.2f} s, {workers} threads {many:.2f} s, "
        f"speed-up {one / many:.2f}x on {os.cpu_count()} cores (target >= 1.7x on 2 cores); "
        f"{statistics.median(busy):.2f} cores busy in the {workers} threads"
    )


def status(field: str) -> int:
    """A number from /proc/self/status (Linux): `Threads`, or `VmRSS` in kB."""
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(field)


def thousand() -> None:
    count = 1_000
    threads_before, rss_before = status("Threads"), status("VmRSS")
    alive: list[Environment] = []
    times = []
    for _ in range(count):
        started = time.perf_counter()
        alive.append(Environment())
        times.append(time.perf_counter() - started)
    threads_after, rss_after = status("Threads"), status("VmRSS")
    # Beside them, in the same run: a new environment while none other is alive.
    alone = []
    for _ in range(200):
        started = time.perf_counter()
        Environment().close()
        alone.append(time.perf_counter() - started)
    last = statistics.median(times[-100:]) * 1e6
    answered = sum(env.execute("print(1)").stdout == "1\n" for env in alive)
    per_env_mb = (rss_after - rss_before) / 1024 / count
    print(
        f"{count} environments alive: creation {last:.1f} us with {count - 100}-{count} alive "
        f"(median of the last 100; first 100: {statistics.median(times[:100]) * 1e6:.1f} us; "
        f"one alone, created and closed: {statistics.median(alone) * 1e6:.1f} us) "
        f"(target <= 300 us); threads {threads_before} before, {threads_after} after "
        f"(target: bounded); RSS {per_env_mb:.2f} MB each (target <= 2 MB); "
        f"{answered}/{count} answered"
    )


def arming() -> None:
    env = Environment()
    count = 20_000
    # A numeric `for` with an empty body is one instruction per iteration.
    codes = {"": "", "900 iterations": "for i = 1, 900 do end", "1100 iterations": "for i = 1, 1100 do end"}
    wall: dict[str, list[float]] = {name: [] for name in codes}
    cpu: dict[str, list[float]] = {name: [] for name in codes}
    for _ in range(7):
        for name, code in codes.items():
            started, processor = time.perf_counter(), time.process_time()
            for _ in range(count):
                env.execute(code)
            wall[name].append((time.perf_counter() - started) / count * 1e6)
            cpu[name].append((time.process_time() - processor) / count * 1e6)
    print(
        "execute, wall (processor) time: "
        + ", ".join(
            f"{name or repr('')} {statistics.median(wall[name]):.1f} us ({statistics.median(cpu[name]):.1f} us)"
            for name in codes
        )
        + " (the timer is armed past 1,000 instructions)"
    )


def gathered() -> None:
    count, rounds = 1_000, 5
    alive = [Environment() for _ in range(count)]
    code = "x = (x or 0) + 1 print(x)"
    threads_before = status("Threads")
    seen = [threads_before]

    def sync_calls() -> float:
        return timed(lambda: [env.execute(code) for env in alive])

    async def gather_calls() -> float:
        async def watch() -> None:
            while True:
                seen.append(status("Threads"))
                await asyncio.sleep(0.001)

        watcher = asyncio.ensure_future(watch())
        started = time.perf_counter()
        results = await asyncio.gather(*(env.execute_async(code) for env in alive))
        elapsed = time.perf_counter() - started
        watcher.cancel()
        assert all(result.ok for result in results)
        return elapsed

    sync, together = [], []
    for _ in range(rounds):
        sync.append(sync_calls())
        together.append(asyncio.run(gather_calls()))
    answered = sum(env.execute("print(x)").stdout == f"{2 * rounds}\n" for env in alive)
    one, many = statistics.median(sync), statistics.median(together)
    print(
        f"{count} environments: {count} execute one after the other {one * 1e3:.1f} ms "
        f"({one / count * 1e6:.1f} us per call); {count} execute_async gathered on one event "
        f"loop {many * 1e3:.1f} ms ({many / count * 1e6:.1f} us per call); threads "
        f"{threads_before} before, at most {max(seen)} during, {status('Threads')} after "
        f"(target: bounded); {answered}/{count} answered"
    )


def episodes() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from openai_server import ScriptedServer

    from rlm_registry import ask

    count = 100
    turns = [
        "```lua\nerrors = grep(context, 'ERROR')\nprint(#errors)\n```",
        "```lua\nfirst = errors[1].text\nprint(first)\n```",
        "```lua\nFINAL(tostring(#errors))\n```",
    ]
    log = "\n".join(["INFO start", "ERROR gateway timeout", "INFO ok", "ERROR billing down"])
    with ScriptedServer(turns * (count + 1)) as server:

        def episode() -> None:
            answer = ask("How many errors?", log, model="scripted", base_url=server.base_url, api_key="sk")
            assert answer.answer == "2", answer.answer

        episode()  # warm up
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            episode()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"scripted 3-turn episodes against a local server: {count / wall:.1f} per second, "
        f"{count / cpu:.1f} per second of processor time (the server's share included); "
        f"{wall / count * 1e3:.2f} ms each"
    )


BENCHMARKS = {
    "creation": creation,
    "round_trip": round_trip,
    "context": context,
    "threads": threads,
    "thousand": thousand,
    "arming": arming,
    "async": gathered,
    "episodes": episodes,
}

if __name__ == "__main__":
    chosen = sys.argv[1:] or list(BENCHMARKS)
    for name in chosen:
        BENCHMARKS[name]()
