"""The limits from Python: hostile Lua ends in an ExecResult with `limit` set, the
environment keeps working, and the interpreter is unharmed."""

import threading
import time

import pytest

from rlm_registry import Environment


def test_an_endless_loop_hits_the_time_limit_even_inside_pcall():
    env = Environment(time_limit=0.2)
    env.execute("kept = 'yes'")
    for code in ["while true do end", "pcall(function() while true do end end)"]:
        started = time.monotonic()
        result = env.execute(code)
        assert result.limit == "time", code
        assert result.error.startswith("time limit exceeded")
        assert time.monotonic() - started < 5
    assert env["kept"] == "yes"


def test_a_memory_bomb_hits_the_memory_limit():
    env = Environment(memory_limit_mb=16)
    result = env.execute("t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end")
    assert result.limit == "memory"
    assert result.error.startswith("memory limit exceeded")
    result = env.execute("s = 'x' while true do s = s .. s end")
    assert result.limit == "memory"
    assert env.execute("t = nil s = nil print('fine')").stdout == "fine\n"


def test_too_much_output_hits_the_output_limit_and_keeps_what_fit():
    env = Environment(output_limit=100)
    result = env.execute("for i = 1, 1000 do print('line', i) end")
    assert result.limit == "output"
    assert 0 < len(result.stdout) <= 100
    assert result.stdout.startswith("line\t1\n")


def test_deep_recursion_is_stopped():
    env = Environment()
    result = env.execute("local function f(n) return 1 + f(n + 1) end f(1)")
    assert result.limit == "recursion" or "stack overflow" in result.error
    assert env.execute("print('alive')").stdout == "alive\n"


def test_interrupt_stops_a_running_execution_from_another_thread():
    env = Environment(time_limit=30)
    timer = threading.Timer(0.2, env.interrupt)
    timer.start()
    started = time.monotonic()
    result = env.execute("while true do end")
    timer.join()
    assert result.limit == "interrupted"
    assert time.monotonic() - started < 10
    # The next execution is not interrupted.
    assert env.execute("for i = 1, 1e6 do end print('ran')").stdout == "ran\n"


def test_interrupt_between_executions_does_not_stop_the_next_one():
    env = Environment()
    env.interrupt()
    assert env.execute("print(1)").stdout == "1\n"


@pytest.mark.parametrize("code", ["string.rep('x', 2^40)", "('x'):rep(1e10)"])
def test_huge_allocations_in_one_call_are_limits_not_crashes(code):
    env = Environment(memory_limit_mb=32)
    result = env.execute(code)
    assert result.error is not None
    assert env.execute("print('ok')").stdout == "ok\n"
