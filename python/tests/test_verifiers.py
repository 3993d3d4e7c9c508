"""rlm_registry.integrations.verifiers: a rollout of the example taskset
(examples/verifiers/) through `LuaRLMHarness` with verifiers' own evaluation entry point
(`vf-eval`) on its subprocess runtime, against the scripted server; and the harness's
command line.

verifiers' ACP runner is a uv script (`agent-client-protocol`, `httpx`): the test needs
`uv` beside this interpreter (pip installs it there) and the package index."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openai_server import ScriptedServer
from optional import require_package

require_package("verifiers")

from rlm_registry.integrations.verifiers import LuaRLMHarness, LuaRLMHarnessConfig  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "verifiers" / "lua_rlm_doc_qa"
BIN = Path(sys.executable).parent


def lua(code: str) -> str:
    return f"```lua\n{code}\n```"


def tools_or_skip() -> Path:
    """`vf-eval` and `uv` beside this interpreter: a failure under RLM_REQUIRE_TOOLS=1,
    else a skip."""
    vf_eval = shutil.which("vf-eval", path=str(BIN))
    uv = shutil.which("uv", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if vf_eval is None or uv is None:
        missing = "vf-eval" if vf_eval is None else "uv"
        message = f"{missing} is not installed beside {sys.executable} (pip install 'rlm-registry[verifiers]' uv)"
        if os.environ.get("RLM_REQUIRE_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return Path(vf_eval)


def vf_eval(server: ScriptedServer, output: Path, *flags: str) -> dict[str, Any]:
    """One `vf-eval` run of the example's first task, one rollout; its trace."""
    command = [
        str(tools_or_skip()),
        "lua_rlm_doc_qa",
        "--model",
        "scripted-model",
        "--client.base-url",
        server.base_url,
        "--client.api-key-var",
        "SCRIPTED_API_KEY",
        "--env.agent.runtime.type",
        "subprocess",
        "--no-push",
        "--no-rich",
        "-n",
        "1",
        "-o",
        str(output),
        "--run.dir",
        "run",
        *flags,
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(EXAMPLE),
        "SCRIPTED_API_KEY": "sk-test",
        # verifiers' runtime finds uv on PATH for its runner's script.
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    traces = output / "run" / "traces.jsonl"
    assert traces.exists(), finished.stderr[-3000:]
    (episode,) = [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]
    assert episode["errors"] == [], episode["errors"]
    (trace,) = episode["traces"]
    assert trace["errors"] == [], trace["errors"]
    return dict(trace)


def test_a_rollout_of_the_example_traces_root_turns_and_sub_calls_and_is_rewarded(tmp_path: Path):
    replies = [
        # The session's context is the rollout's work folder, where the task wrote the
        # document: a corpus of one document, or its text.
        lua(
            "local doc = type(context) == 'table' and context[1].text or context\n"
            "errors = grep(doc, 'ERROR')\nprint(#errors)"
        ),
        lua("verdict = llm_query('which service fails most? ' .. errors[1].text)\nprint(verdict)"),
        lua("FINAL(verdict)"),
    ]
    with ScriptedServer(replies, sub_answer=lambda prompt: "gateway") as server:
        trace = vf_eval(server, tmp_path / "out")
    # Every model call went through verifiers' interception: three root turns and the
    # sub-call, each in the trace as the server received it.
    assert len(server.turns()) == 3
    (sub_call,) = server.sub_calls()
    assert sub_call["messages"][-1]["content"] == "which service fails most? 2026-03-01 10:00:02 ERROR gateway   upstream timeout"
    calls = trace["calls"]
    assert len(calls) == 4
    assert {call["model"] for call in calls} == {"scripted-model"}
    traced = json.dumps(trace["nodes"])
    assert "which service fails most?" in traced
    assert "Which service logged the most ERROR lines?" in traced
    # The reply is the answer, and the exact-match reward says so.
    assert trace["root_reply"] == "gateway"
    assert trace["rewards"]["exact_match"]["score"] == 1.0


def test_a_wrong_answer_is_rewarded_zero(tmp_path: Path):
    with ScriptedServer([lua("FINAL('billing')")]) as server:
        trace = vf_eval(server, tmp_path / "out")
    assert trace["root_reply"] == "billing"
    assert trace["rewards"]["exact_match"]["score"] == 0.0


class _Runtime:
    """What `LuaRLMHarness.command` reads of a runtime."""

    def __init__(self, type: str) -> None:
        self.type = type


def test_the_harness_passes_its_settings_as_rlm_acp_flags_with_the_cache_off():
    config = LuaRLMHarnessConfig(
        id="lua-rlm", max_iterations=5, max_depth=2, max_cost=0.5, context=["docs", "notes.md"]
    )
    command = LuaRLMHarness(config).command(_Runtime("subprocess"))
    assert command == [
        sys.executable,
        "-m",
        "rlm_registry",
        "acp",
        "--no-cache",
        "--max-iterations",
        "5",
        "--max-depth",
        "2",
        "--max-cost",
        "0.5",
        "--context",
        "docs",
        "--context",
        "notes.md",
    ]


def test_the_harness_runs_python3_in_a_container_unless_told_which_python():
    harness = LuaRLMHarness(LuaRLMHarnessConfig(id="lua-rlm"))
    assert harness.command(_Runtime("docker"))[:4] == ["python3", "-m", "rlm_registry", "acp"]
    chosen = LuaRLMHarness(LuaRLMHarnessConfig(id="lua-rlm", python="/opt/venv/bin/python"))
    assert chosen.command(_Runtime("docker"))[0] == "/opt/venv/bin/python"


def test_a_bad_setting_is_refused_by_the_config():
    with pytest.raises(ValueError, match="max_iterations"):
        LuaRLMHarnessConfig(id="lua-rlm", max_iterations=0)


def test_the_reply_is_the_answer_alone_when_the_model_writes_prose_around_its_code(tmp_path: Path):
    replies = ["Let me look at the document.\n" + lua("print(#context)"), "Done.\n" + lua("FINAL('gateway')")]
    with ScriptedServer(replies) as server:
        trace = vf_eval(server, tmp_path / "out")
    assert trace["root_reply"] == "gateway"
    assert trace["rewards"]["exact_match"]["score"] == 1.0
