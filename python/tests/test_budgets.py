"""ask's budgets beside tokens and calls: `max_cost` with `config`'s price table, bad
input refused, and Ctrl-C, which cancels the run and raises `KeyboardInterrupt`."""

import json
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


def test_max_cost_with_a_price_table_is_a_limit_error_naming_the_budget(tmp_path: Path):
    config = tmp_path / "rlm.toml"
    config.write_text('[prices."m"]\ninput = 1.0\noutput = 1.0\n')
    with ScriptedServer([lua("print(1)")] * 5) as server:
        with pytest.raises(LimitError) as caught:
            ask("?", "x", model="m", base_url=server.base_url, config=config, max_cost=0.001)
    assert caught.value.kind == "cost"
    assert "--max-cost" in str(caught.value)
    assert server.requests == [], "a call that does not fit is not sent"


def test_max_cost_lets_a_run_within_it_finish(tmp_path: Path):
    config = tmp_path / "rlm.toml"
    config.write_text('[prices."m"]\ninput = 1.0\noutput = 1.0\n')
    with ScriptedServer([lua("FINAL('done')")]) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url, config=config, max_cost=1.0)
    assert answer.answer == "done"
    # 100 prompt and 10 completion tokens, at $1 per million each.
    assert answer.cost == pytest.approx(0.00011)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_negative_or_nan_max_cost_is_refused(bad: float):
    with pytest.raises(ValueError, match="max_cost"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9/v1", max_cost=bad)


CHILD = """
import sys, threading, time
sys.path.insert(0, {tests!r})
from openai_server import ScriptedServer
from rlm_registry import ask

def ready():
    # The first turn was asked: its reply is an endless block.
    while not server.requests:
        time.sleep(0.01)
    print("ready", flush=True)

with ScriptedServer(["```lua\\nwhile true do end\\n```"]) as server:
    threading.Thread(target=ready, daemon=True).start()
    try:
        ask("?", "x", model="m", base_url=server.base_url, trace={trace!r})
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
"""


def test_ctrl_c_raises_keyboard_interrupt_within_a_second_and_leaves_the_trace(tmp_path: Path):
    trace = tmp_path / "trace.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(tests=str(TESTS), trace=str(trace))],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    time.sleep(0.5)  # the run is in its endless block
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    line = child.stdout.readline().split()
    child.wait(timeout=10)
    assert line[0] == "interrupted", line
    assert float(line[1]) - sent < 1.0
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert records[0]["event"] == "start"
    assert all(record["event"] != "turn" for record in records), "the cut turn is not written"
