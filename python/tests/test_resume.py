"""`ask(resume=TRACE)`: a run stopped (its iteration cap, Ctrl-C) goes on from its
trace with no answered request sent again, as `rlm ask --resume` does; a finished run
gives its answer with nothing sent; a changed context is refused unless forced."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai_server import ScriptedServer
from rlm_registry import LimitError, ask

TESTS = Path(__file__).parent


def lua(code: str) -> str:
    return f"```lua\n{code}\n```"


def capped_run(tmp_path: Path, context: str = "abc") -> Path:
    """A run stopped by its iteration cap after setting `x` in turn 1."""
    trace = tmp_path / "run.jsonl"
    with ScriptedServer([lua("x = 41"), lua("print(x)")]) as server:
        with pytest.raises(LimitError):
            ask("?", context, model="m", base_url=server.base_url, max_iterations=2, trace=trace)
    return trace


def test_a_run_stopped_at_its_cap_goes_on_with_a_larger_one_and_sends_only_the_new_turn(
    tmp_path: Path,
):
    trace = capped_run(tmp_path)
    with ScriptedServer([lua("FINAL(x + 1)")]) as server:
        answer = ask(resume=trace, context="abc", base_url=server.base_url, max_iterations=4)
    assert answer.answer == "42", "turn 1's state rebuilt"
    assert len(server.requests) == 1, "turns 1 and 2 were not asked again"
    assert answer.trace == str(trace)
    assert '"event":"resume"' in trace.read_text()


def test_a_finished_run_gives_its_answer_and_sends_nothing(tmp_path: Path):
    trace = tmp_path / "run.jsonl"
    with ScriptedServer([lua("FINAL('done')")]) as server:
        ask("?", "abc", model="m", base_url=server.base_url, trace=trace)
    answer = ask(resume=trace, base_url="http://127.0.0.1:9/v1")
    assert (answer.answer, answer.llm_calls) == ("done", 0)


def test_a_changed_context_is_refused_unless_forced(tmp_path: Path):
    trace = capped_run(tmp_path)
    with pytest.raises(ValueError, match="context"):
        ask(resume=trace, context="other", base_url="http://127.0.0.1:9/v1", max_iterations=4)
    with pytest.raises(ValueError, match="context="):
        # A text context has no path to gather it again from.
        ask(resume=trace, base_url="http://127.0.0.1:9/v1", max_iterations=4)
    with ScriptedServer([lua("FINAL(x + 1)")]) as server:
        answer = ask(
            resume=trace, context="other", base_url=server.base_url, max_iterations=4, force=True
        )
    assert answer.answer == "42"


def test_a_context_path_is_gathered_again_from_the_trace(tmp_path: Path):
    context = tmp_path / "notes.txt"
    context.write_text("one\ntwo\n")
    trace = capped_run(tmp_path, context)  # type: ignore[arg-type]
    with ScriptedServer([lua("FINAL(x .. ' ' .. line_count(context))")]) as server:
        answer = ask(resume=trace, base_url=server.base_url, max_iterations=4)
    assert answer.answer == "41 2"


def test_a_question_or_a_trace_is_asked_for_not_both(tmp_path: Path):
    trace = capped_run(tmp_path)
    with pytest.raises(ValueError, match="question"):
        ask("again?", resume=trace)
    with pytest.raises(ValueError, match="resume"):
        ask()
    with pytest.raises(ValueError, match="trace="):
        ask(resume=trace, trace=tmp_path / "other.jsonl")
    with pytest.raises(ValueError, match="resume"):
        ask(resume=tmp_path / "missing.jsonl")


CHILD = """
import sys, threading, time
sys.path.insert(0, {tests!r})
from openai_server import ScriptedServer
from rlm_registry import ask

def ready():
    # Turn 2's sub-call is out (held by the server).
    while len(server.requests) < 3:
        time.sleep(0.01)
    print("ready", flush=True)

script = ["```lua\\nx = 41\\n```", "```lua\\ny = llm_query('slow')\\n```"]
with ScriptedServer(script, sub_delay=30) as server:
    threading.Thread(target=ready, daemon=True).start()
    try:
        ask("?", "abc", model="m", base_url=server.base_url, trace={trace!r})
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


def test_a_run_interrupted_by_ctrl_c_resumes_from_its_trace(tmp_path: Path):
    trace = tmp_path / "run.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(tests=str(TESTS), trace=str(trace))],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGINT)
    assert child.stdout.readline().strip() == "interrupted"
    child.wait(timeout=10)
    with ScriptedServer([lua("FINAL(x .. ' ' .. y)")], sub_answer=lambda p: "late") as server:
        answer = ask(resume=trace, context="abc", base_url=server.base_url)
    assert answer.answer == "41 late"
    # The sub-call never answered is asked again, then the last turn: turn 1 and
    # turn 2's reply come from the trace.
    assert [len(server.turns()), len(server.sub_calls())] == [1, 1]
