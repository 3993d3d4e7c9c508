"""Threads: the GIL is released while Lua runs, environments run in parallel, any
thread may use an environment but one at a time, and a second gets BusyError."""

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlm_registry import BusyError, Environment, RlmRegistryError

BUSY_LOOP = "local t = os.clock() while os.clock() - t < {seconds} do end"


# Lua's `os.clock` is C's `clock()`, the process's CPU time: the clock Python reads as
# `time.process_time()`. Both sides read it, so what Lua records as the span of its run
# and what Python threads record are on one timeline. CPU time, not wall time: a thread
# waiting for the GIL (or for a core) does not advance it, so a span is short of nothing
# another thread could have done in it.
SPAN = (
    "local started = os.clock() while os.clock() - started < {seconds} do end"
    " print(string.format('%.6f %.6f', started, os.clock()))"
)


def span_of(result):
    """The (start, end) CPU times the Lua code recorded around its loop."""
    assert result.ok, result.error
    started, ended = (float(part) for part in result.stdout.split())
    return started, ended


def test_another_python_thread_runs_python_while_lua_runs():
    # A thread stamps the CPU clock as fast as it can; Lua records the span of its loop.
    # Stamps inside that span are Python bytecode run while `execute` was running Lua: a
    # binding holding the GIL would leave none there (the thread would wait for the GIL,
    # which a Lua loop never offers back), however long the loop.
    env = Environment()
    stamps = []
    stop = threading.Event()

    def stamp():
        while not stop.is_set():
            stamps.append(time.process_time())

    thread = threading.Thread(target=stamp)
    thread.start()
    try:
        while not stamps:  # the thread is running before Lua starts
            time.sleep(0.001)
        started, ended = span_of(env.execute(SPAN.format(seconds=0.4)))
    finally:
        stop.set()
        thread.join()
    # The middle of the span, away from its edges, where the clock of one thread may
    # lag the other's by a scheduler tick.
    margin = (ended - started) / 4
    inside = [t for t in stamps if started + margin < t < ended - margin]
    assert len(inside) > 100, (started, ended, len(stamps))


def test_environments_run_lua_at_the_same_time_in_separate_threads():
    # Each execution records from inside Lua when its loop began and ended. Run one
    # after the other (a lock, or the GIL held), the second span would begin where the
    # first ended; run in parallel, they overlap for most of their length.
    environments = [Environment() for _ in range(2)]
    ready = threading.Barrier(2)
    spans = []

    def run(env):
        ready.wait()
        spans.append(span_of(env.execute(SPAN.format(seconds=0.4))))

    threads = [threading.Thread(target=run, args=(env,)) for env in environments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (start_a, end_a), (start_b, end_b) = spans
    overlap = min(end_a, end_b) - max(start_a, start_b)
    shorter = min(end_a - start_a, end_b - start_b)
    # Half the shorter span, far above the tick by which two threads' readings of the
    # process's clock may disagree.
    assert overlap > shorter / 2, spans


def test_a_second_thread_using_a_busy_environment_gets_busy_error_at_once():
    env = Environment()
    started = threading.Event()

    def run():
        started.set()
        return env.execute(BUSY_LOOP.format(seconds=1.0))

    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(run)
        started.wait()
        time.sleep(0.2)
        asked = time.monotonic()
        try:
            env.execute("print(1)")
        except BusyError as error:
            assert "in use by another thread" in str(error)
            assert isinstance(error, RlmRegistryError)
        else:
            raise AssertionError("a second thread got in")
        assert time.monotonic() - asked < 0.5
        for use in [lambda: env["x"], lambda: env.__setitem__("x", 1), env.close]:
            try:
                use()
            except BusyError:
                pass
            else:
                raise AssertionError("a second thread got in")
        assert first.result().ok
    # Free again: this thread may use it now.
    assert env.execute("print('mine')").stdout == "mine\n"


def test_an_environment_made_in_one_thread_is_used_from_others():
    env = Environment()
    env.execute("n = 0")
    with ThreadPoolExecutor(4) as pool:
        for _ in range(20):
            pool.submit(lambda: None).result()
            assert pool.submit(env.execute, "n = n + 1").result().ok
    assert env["n"] == 20


def test_llm_query_batched_calls_the_callable_from_several_threads():
    threads = set()
    lock = threading.Lock()

    def llm(prompt):
        with lock:
            threads.add(threading.get_ident())
        time.sleep(0.05)
        return f"<{prompt}>"

    env = Environment(llm=llm)
    started = time.monotonic()
    result = env.execute(
        "local p = {} for i = 1, 8 do p[i] = 'q' .. i end"
        " print(table.concat(llm_query_batched(p), ' '))"
    )
    assert result.stdout == "<q1> <q2> <q3> <q4> <q5> <q6> <q7> <q8>\n"
    assert len(threads) > 1
    # Concurrent: well under eight sequential 50 ms calls.
    assert time.monotonic() - started < 0.35


def test_an_llm_callable_using_its_own_environment_gets_busy_error_not_a_deadlock():
    holder = {}

    def llm(prompt):
        return holder["env"].execute("print(1)").stdout

    env = Environment(llm=llm)
    holder["env"] = env
    result = env.execute("llm_query('x')")
    assert "BusyError" in result.error


def test_many_environments_in_many_threads():
    def work(i):
        with Environment(f"context {i}") as env:
            return env.execute("print(context)").stdout

    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(work, range(32)))
    assert outputs == [f"context {i}\n" for i in range(32)]


def test_after_fork_the_child_makes_its_own_environments():
    import os

    env = Environment()
    env.execute("x = 1")
    with Environment():
        pass  # a thread now waits, idle, to serve the next environment
    pid = os.fork()
    if pid == 0:  # the child: exit codes tell the parent what happened
        code = 0
        try:
            env.execute("print(x)")
            code = 1
        except RlmRegistryError as error:
            if "after fork, create a new one" not in str(error):
                code = 2
        try:
            if Environment().execute("print(2)").stdout != "2\n":
                code = 3
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert env.execute("print(x)").stdout == "1\n"


def thread_count() -> int:
    """The process's threads, as the kernel counts them (Linux)."""
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith("Threads:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_environments_alive_together_hold_no_thread_each():
    before = thread_count()
    alive = [Environment() for _ in range(200)]
    assert [env.execute("print(1)").stdout for env in alive] == ["1\n"] * 200
    # A thread that drops closed environments may have started; not one per environment.
    assert thread_count() - before <= 2


def test_an_environment_keeps_its_limits_on_each_thread_that_uses_it():
    env = Environment(time_limit=0.3)
    env.execute("kept = 42")

    def endless() -> str | None:
        return env.execute("while true do end").limit

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(endless).result(timeout=60) == "time"
    assert endless() == "time"
    assert env.execute("print(kept)").stdout == "42\n"


def test_in_a_forked_child_an_endless_loop_still_hits_the_time_limit():
    import os
    import signal

    # This thread's limits timer now exists; a forked child does not inherit it.
    Environment().execute("x = 1")
    pid = os.fork()
    if pid == 0:
        signal.alarm(30)  # a loop the limit misses ends the child here: exit code -14
        try:
            result = Environment(time_limit=0.2).execute("while true do end")
            code = 0 if result.limit == "time" else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
