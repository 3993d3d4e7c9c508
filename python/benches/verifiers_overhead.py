"""A rollout's overhead through verifiers, per turn: the example taskset
(examples/verifiers/) through `LuaRLMHarness` on verifiers' subprocess runtime, every
model call through its interception, against the same prompt sent straight to
`python -m rlm_registry acp` by the ACP client, both against a zero-latency scripted
server (python/tests/openai_server.py).

    pip install './python[verifiers]' agent-client-protocol==0.12.1 uv
    python python/benches/verifiers_overhead.py [TURNS]

A prompt of TURNS root turns (default 30; each block prints, the last ends the run).
Per turn: the median time between two requests reaching the server, one turn's round
trip through the agent (and, through verifiers, its interception). Per rollout: the
whole exchange, through verifiers the trace's agent span (its ACP runner and the agent
started, initialize, session/new, the prompt), straight the same exchange timed by the
client. Medians of 5 rollouts each (`vf-eval -r 5 -c 1`: one at a time). nano-rlm's
harness installs nano-rlm from its git repository at setup, which this benchmark does
not reach for: its figure is not measured here.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from openai_server import ScriptedServer  # noqa: E402

EXAMPLE = HERE.parents[1] / "examples" / "verifiers" / "lua_rlm_doc_qa"
BIN = Path(sys.executable).parent
ROUNDS = 5


class TimedServer(ScriptedServer):
    """The scripted server, noting when each request arrives."""

    def __init__(self, replies: list[str]) -> None:
        super().__init__(replies)
        self.arrivals: list[float] = []

    def _answer(self, request: dict) -> tuple[int, dict]:
        self.arrivals.append(time.perf_counter())
        return super()._answer(request)


def gaps(arrivals: list[float], turns: int) -> list[float]:
    """The times between consecutive requests of each rollout (`turns` requests each)."""
    rollouts = [arrivals[start : start + turns] for start in range(0, len(arrivals), turns)]
    return [later - earlier for rollout in rollouts for earlier, later in zip(rollout, rollout[1:])]


def script(turns: int) -> list[str]:
    """`turns` root replies: blocks that print, then one that ends the run."""
    blocks = [f"```lua\nprint({turn})\n```" for turn in range(turns - 1)]
    return [*blocks, "```lua\nFINAL('gateway')\n```"]


async def straight(turns: int, workdir: Path) -> tuple[float, list[float]]:
    """Seconds of one exchange with the agent, spawned by the ACP client, and the gaps
    between its requests."""
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
    from acp.schema import ClientCapabilities

    class Quiet:
        async def session_update(self, session_id: str, update: object, **kwargs: object) -> None:
            pass

    with TimedServer(script(turns)) as server:
        command = [sys.executable, "-m", "rlm_registry", "acp", "--no-cache", "--max-iterations", str(turns)]
        env = {
            **os.environ,
            "RLM_MODEL": "scripted-model",
            "RLM_BASE_URL": server.base_url,
            "RLM_API_KEY": "sk-bench",
        }
        started = time.perf_counter()
        async with spawn_agent_process(Quiet(), command[0], *command[1:], env=env, cwd=workdir) as (
            connection,
            _,
        ):
            await connection.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
            session = await connection.new_session(cwd=str(workdir), mcp_servers=[])
            response = await connection.prompt(session_id=session.session_id, prompt=[text_block("Which service?")])
        seconds = time.perf_counter() - started
    if response.stop_reason != "end_turn":
        raise SystemExit(f"the straight run ended with {response.stop_reason}")
    return seconds, gaps(server.arrivals, turns)


def through_verifiers(turns: int, output: Path) -> tuple[list[float], list[float]]:
    """The agent spans of `ROUNDS` rollouts, one at a time, through `vf-eval`, and the
    gaps between their requests."""
    vf_eval = shutil.which("vf-eval", path=str(BIN))
    if vf_eval is None:
        raise SystemExit(f"vf-eval is not installed beside {sys.executable}")
    with TimedServer(script(turns) * ROUNDS) as server:
        command = [
            vf_eval,
            "lua_rlm_doc_qa",
            "--model",
            "scripted-model",
            "--client.base-url",
            server.base_url,
            "--client.api-key-var",
            "BENCH_API_KEY",
            "--env.agent.runtime.type",
            "subprocess",
            "--env.agent.harness.id",
            "lua_rlm_doc_qa",
            "--env.agent.harness.max-iterations",
            str(turns),
            "--no-push",
            "--no-rich",
            "-n",
            "1",
            "-r",
            str(ROUNDS),
            "-c",
            "1",
            "-o",
            str(output),
            "--run.dir",
            f"turns-{turns}",
        ]
        env = {
            **os.environ,
            "PYTHONPATH": str(EXAMPLE),
            "BENCH_API_KEY": "sk-bench",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        arrivals = list(server.arrivals)
    if finished.returncode != 0:
        raise SystemExit(finished.stderr[-3000:])
    lines = (output / f"turns-{turns}" / "traces.jsonl").read_text().splitlines()
    traces = [trace for line in lines for trace in json.loads(line)["traces"]]
    spans = []
    for trace in traces:
        if trace["errors"] or len(trace["calls"]) != turns:
            raise SystemExit(f"a rollout did not run {turns} turns: {trace['errors']}")
        agent = trace["timing"]["agent"]
        spans.append(agent["end"] - agent["start"])
    return spans, gaps(arrivals, turns)


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        workdir = root / "work"
        workdir.mkdir()
        (workdir / "document.txt").write_text("ERROR gateway upstream timeout\n")
        exchanges, direct_gaps = [], []
        for _ in range(ROUNDS):
            seconds, between = asyncio.run(straight(turns, workdir))
            exchanges.append(seconds)
            direct_gaps += between
        spans, routed_gaps = through_verifiers(turns, root / "out")
    direct_turn, routed_turn = statistics.median(direct_gaps), statistics.median(routed_gaps)
    direct_run, routed_run = statistics.median(exchanges), statistics.median(spans)
    print(f"{turns} turns per prompt; medians of {ROUNDS} rollouts")
    print(f"straight ACP      : {direct_turn * 1e3:7.2f} ms per turn, {direct_run * 1e3:7.1f} ms per rollout")
    print(f"through verifiers : {routed_turn * 1e3:7.2f} ms per turn, {routed_run * 1e3:7.1f} ms per rollout")
    print(
        f"overhead          : {(routed_turn - direct_turn) * 1e3:7.2f} ms per turn, "
        f"{(routed_run - direct_run) * 1e3:7.1f} ms per rollout"
    )


if __name__ == "__main__":
    main()
