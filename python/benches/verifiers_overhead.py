"""A rollout's overhead through verifiers, per turn: the example taskset
(examples/verifiers/) through `LuaRLMHarness` on verifiers' subprocess runtime, every
model call through its interception, against the same prompt sent straight to
`python -m rlm_registry acp` by the ACP client, both against a zero-latency scripted
server (python/tests/openai_server.py).

    pip install './python[verifiers]' agent-client-protocol==0.12.1 uv
    python python/benches/verifiers_overhead.py [SHORT LONG]

Each side runs a prompt of SHORT turns (default 2) and one of LONG turns (default 42),
the last turn's code ending the run; the per-turn figure is the slope between the two
(fixed costs cancel), the fixed figure the SHORT prompt's time less SHORT turns at that
slope. Through verifiers, the time is the trace's agent span (the runner and the agent
started, initialize, session/new, the prompt); straight, the same exchange timed by the
client. Each figure is the median of 5 rollouts (`vf-eval -r 5 -c 1`: one at a time).
nano-rlm's harness installs nano-rlm from its git repository at setup, which this
benchmark does not reach for: its figure is not measured here.
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


def script(turns: int) -> list[str]:
    """`turns` root replies: blocks that print, then one that ends the run."""
    blocks = [f"```lua\nprint({turn})\n```" for turn in range(turns - 1)]
    return [*blocks, "```lua\nFINAL('gateway')\n```"]


async def straight(turns: int, workdir: Path) -> float:
    """Seconds of one exchange with the agent, spawned by the ACP client."""
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
    from acp.schema import ClientCapabilities

    class Quiet:
        async def session_update(self, session_id: str, update: object, **kwargs: object) -> None:
            pass

    with ScriptedServer(script(turns)) as server:
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
    return seconds


def through_verifiers(turns: int, output: Path) -> list[float]:
    """The agent spans of `ROUNDS` rollouts, one at a time, through `vf-eval`."""
    vf_eval = shutil.which("vf-eval", path=str(BIN))
    if vf_eval is None:
        raise SystemExit(f"vf-eval is not installed beside {sys.executable}")
    with ScriptedServer(script(turns) * ROUNDS) as server:
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
    return spans


def per_turn(short: int, long: int, short_seconds: float, long_seconds: float) -> tuple[float, float]:
    """The slope per turn and the fixed part, in seconds."""
    slope = (long_seconds - short_seconds) / (long - short)
    return slope, short_seconds - short * slope


def main() -> None:
    short, long = (int(arg) for arg in sys.argv[1:3]) if len(sys.argv) > 2 else (2, 42)
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        workdir = root / "work"
        workdir.mkdir()
        (workdir / "document.txt").write_text("ERROR gateway upstream timeout\n")
        direct = {
            turns: statistics.median(asyncio.run(straight(turns, workdir)) for _ in range(ROUNDS))
            for turns in (short, long)
        }
        routed = {turns: statistics.median(through_verifiers(turns, root / "out")) for turns in (short, long)}
    direct_turn, direct_fixed = per_turn(short, long, direct[short], direct[long])
    routed_turn, routed_fixed = per_turn(short, long, routed[short], routed[long])
    print(f"straight ACP      : {direct_turn * 1e3:7.2f} ms per turn, {direct_fixed * 1e3:7.1f} ms fixed")
    print(f"through verifiers : {routed_turn * 1e3:7.2f} ms per turn, {routed_fixed * 1e3:7.1f} ms fixed")
    print(
        f"overhead          : {(routed_turn - direct_turn) * 1e3:7.2f} ms per turn, "
        f"{(routed_fixed - direct_fixed) * 1e3:7.1f} ms per rollout"
    )


if __name__ == "__main__":
    main()
