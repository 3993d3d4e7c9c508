"""The asyncio API: `Environment.execute_async` and `ask_async` give what `execute` and
`ask` give, many at once on one event loop, on a bounded pool of threads; and a thousand
environments live in one process."""

import asyncio
import os
import sys
import threading
import time

import pytest

from openai_server import ScriptedServer
from rlm_registry import BusyError, Environment, LimitError, LlmError, ask, ask_async

# The pool's default size (`RLM_ASYNC_THREADS` unset).
POOL = 64


def lua(code: str) -> str:
    return f"```lua\n{code}\n```"


def task_count() -> int:
    """The process's threads as the kernel counts them (Linux)."""
    return len(os.listdir("/proc/self/task"))


def fields(result) -> tuple:
    """What an `ExecResult` says, its time aside."""
    return (result.stdout, result.error, result.hint, result.final, result.limit, result.ok)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
def test_a_thousand_execute_async_on_a_thousand_environments_answer_right_on_bounded_threads():
    environments = [Environment() for _ in range(1000)]
    python_threads, tasks = threading.active_count(), task_count()

    async def main():
        seen = []

        async def watch():
            while True:
                seen.append(task_count())
                await asyncio.sleep(0.001)

        watcher = asyncio.ensure_future(watch())
        results = await asyncio.gather(
            *(env.execute_async(f"print(context == nil, {i} * 2)") for i, env in enumerate(environments))
        )
        watcher.cancel()
        return results, max(seen, default=task_count())

    results, most = asyncio.run(main())
    assert [r.stdout for r in results] == [f"true\t{i * 2}\n" for i in range(1000)]
    # No Python thread made, and the kernel's count bounded by the pool (and the
    # runtime's one thread for the futures), not by the thousand calls.
    assert threading.active_count() == python_threads
    assert most - tasks <= POOL + 2, (tasks, most)
    assert task_count() - tasks <= POOL + 2


def test_a_thousand_environments_alive_in_one_process_each_answer_with_the_baked_registry():
    alive = [Environment(f"line one\nline {i}\n") for i in range(1000)]
    answers = [env.execute("print(line_count(context))").stdout for env in alive]
    assert answers == ["2\n"] * 1000
    assert [env["context"] for env in alive[::250]] == [f"line one\nline {i}\n" for i in range(0, 1000, 250)]


@pytest.mark.parametrize(
    ("code", "time_limit", "output_limit"),
    [
        ("x = 41 print(x + 1) FINAL(x + 1)", 30.0, None),
        ("error('broken')", 30.0, None),
        ("x = = 1", 30.0, None),
        ("print(len(context))", 30.0, None),
        ("while true do end", 0.2, None),
        ("for i = 1, 1000 do print(i) end", 30.0, 100),
    ],
    ids=["answer", "lua-error", "syntax-error", "python-hint", "time-limit", "output-limit"],
)
def test_execute_async_gives_the_result_execute_gives(code, time_limit, output_limit):
    def fresh() -> Environment:
        return Environment("text", time_limit=time_limit, output_limit=output_limit)

    expected = fresh().execute(code)
    got = awaited(lambda: fresh().execute_async(code))
    assert fields(got) == fields(expected)
    assert type(got) is type(expected)


def awaited(make):
    """What the awaitable `make()` gives, made and awaited inside an event loop (where
    the asyncio API must be called)."""

    async def main():
        return await make()

    return asyncio.run(main())


def test_execute_async_on_a_closed_environment_raises_the_value_error_execute_raises():
    env = Environment()
    env.close()
    with pytest.raises(ValueError, match="closed") as sync:
        env.execute("print(1)")
    with pytest.raises(ValueError, match="closed") as from_async:
        awaited(lambda: env.execute_async("print(1)"))
    assert str(from_async.value) == str(sync.value)


def test_a_second_call_on_a_busy_environment_gets_busy_error_as_from_a_second_thread():
    env = Environment()

    async def main():
        running = env.execute_async("local t = os.clock() while os.clock() - t < 0.5 do end print('done')")
        with pytest.raises(BusyError):
            await env.execute_async("print(1)")
        # A thread using it meanwhile is refused alike.
        with pytest.raises(BusyError):
            await asyncio.to_thread(env.execute, "print(1)")
        return await running

    assert asyncio.run(main()).stdout == "done\n"
    assert env.execute("print(2)").stdout == "2\n"


def test_execute_async_outside_an_event_loop_is_refused_and_leaves_the_environment_usable():
    env = Environment()
    with pytest.raises(RuntimeError):
        env.execute_async("print(1)")
    assert env.execute("print(1)").stdout == "1\n"


def test_cancelling_execute_async_interrupts_the_execution_and_the_environment_stays_usable():
    env = Environment(time_limit=30.0)
    env.execute("kept = 42")

    async def main():
        task = asyncio.ensure_future(env.execute_async("while true do end"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancelled = time.monotonic()
        # The execution stops at its next check, milliseconds later; until then the
        # environment is busy.
        while True:
            try:
                result = await env.execute_async("print(kept)")
                return result, time.monotonic() - cancelled
            except BusyError:
                await asyncio.sleep(0.005)

    result, waited = asyncio.run(main())
    assert result.stdout == "42\n"
    assert waited < 2.0


def test_ask_async_gives_the_answer_ask_gives():
    replies = [lua("local n = line_count(context) print(n)"), lua("FINAL('lines: ' .. line_count(context))")]
    with ScriptedServer(list(replies)) as server:
        expected = ask("How many lines?", "a\nb\nc\n", model="m", base_url=server.base_url)
    with ScriptedServer(list(replies)) as server:
        got = awaited(lambda: ask_async("How many lines?", "a\nb\nc\n", model="m", base_url=server.base_url))
        turns = server.turns()
    assert got.answer == expected.answer == "lines: 3"
    assert (got.turns, got.prompt_tokens, got.completion_tokens, got.llm_calls) == (
        expected.turns,
        expected.prompt_tokens,
        expected.completion_tokens,
        expected.llm_calls,
    )
    assert len(turns) == 2


def test_ask_async_raises_the_limit_error_ask_raises_with_what_the_run_took():
    with ScriptedServer([lua("print(1)")] * 5) as server:
        with pytest.raises(LimitError, match="iteration limit reached") as caught:
            awaited(lambda: ask_async("?", "x", model="m", base_url=server.base_url, max_iterations=2))
    assert caught.value.kind == "iterations"
    assert caught.value.turns == 2


def test_ask_async_checks_its_arguments_as_ask_does():
    with pytest.raises(ValueError, match="give a question") as sync:
        ask(None, "x", model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="give a question") as from_async:
        awaited(lambda: ask_async(None, "x", model="m", base_url="http://127.0.0.1:9/v1"))
    assert str(from_async.value) == str(sync.value)


def test_ask_async_gathered_run_side_by_side_against_a_slow_server():
    # Each run's code waits for one sub-call the server answers after `delay`. One run
    # alone is timed first: one after the other, `runs` of them would take `runs` times
    # as long; gathered, they take little more than one.
    runs, delay = 4, 1.0
    replies = [lua("FINAL(llm_query('the answer?'))")] * (runs + 1)
    with ScriptedServer(replies, sub_answer=lambda prompt: "forty-two", sub_delay=delay) as server:

        def run(count: int) -> tuple[list, float]:
            async def main():
                return await asyncio.gather(
                    *(ask_async(f"question {i}", "x", model="m", base_url=server.base_url) for i in range(count))
                )

            started = time.monotonic()
            answers = asyncio.run(main())
            return answers, time.monotonic() - started

        _, alone = run(1)
        answers, wall = run(runs)
        in_flight = server.max_in_flight
    assert [a.answer for a in answers] == ["forty-two"] * runs
    assert in_flight == runs
    assert wall < runs * alone * 0.6, (alone, wall)


def test_execute_async_calls_the_llm_callable_from_the_pool_as_execute_does():
    def fresh() -> Environment:
        return Environment(llm=lambda prompt: prompt.upper())

    code = "print(llm_query('quiet words'))"
    expected = fresh().execute(code)
    got = awaited(lambda: fresh().execute_async(code))
    assert got.stdout == expected.stdout == "QUIET WORDS\n"


def test_ask_async_against_an_unreachable_server_raises_the_llm_error_ask_raises():
    # Port 9 (discard) on loopback: nothing listens, the connection is refused.
    arguments = dict(model="m", base_url="http://127.0.0.1:9/v1", context_window=8000)
    with pytest.raises(LlmError) as sync:
        ask("?", "x", **arguments)
    with pytest.raises(LlmError) as from_async:
        awaited(lambda: ask_async("?", "x", **arguments))
    assert type(from_async.value) is type(sync.value)
