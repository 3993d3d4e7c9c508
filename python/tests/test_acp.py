"""`python -m rlm_registry acp`: the package's ACP agent, driven by the official ACP
client (`agent-client-protocol`, module `acp`) against the scripted OpenAI-compatible
server, whose replies are Lua; and its command line."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from openai_server import ScriptedServer
from optional import require_package

require_package("acp")

from acp import (  # noqa: E402
    PROTOCOL_VERSION,
    embedded_text_resource,
    resource_block,
    spawn_agent_process,
    text_block,
)
from acp.schema import (  # noqa: E402
    AgentMessageChunk,
    ClientCapabilities,
    DeniedOutcome,
    RequestPermissionResponse,
    TextContentBlock,
)

from rlm_registry.__main__ import _parser, settings  # noqa: E402

LOG = "\n".join(
    ["INFO start", "ERROR gateway timeout", "INFO ok", "ERROR billing down", "ERROR gateway 502"]
)

# No exchange with the agent may take longer: a hang is a failure, not a stuck suite.
EXCHANGE_SECONDS = 60


def lua(code: str) -> str:
    return f"```lua\n{code}\n```"


class Recorder:
    """An ACP client that keeps every update and allows nothing it is asked."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    def reply(self) -> str:
        """The agent's message, as its chunks said it."""
        return "".join(
            update.content.text
            for update in self.updates
            if isinstance(update, AgentMessageChunk) and isinstance(update.content, TextContentBlock)
        )


def agent_command(server: ScriptedServer, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlm_registry",
        "acp",
        "--model",
        "scripted-model",
        "--base-url",
        server.base_url,
        *flags,
    ]


def agent_env() -> dict[str, str]:
    # The conftest fixture has taken every model setting out of os.environ.
    return {**os.environ, "RLM_API_KEY": "sk-test"}


async def prompt_once(
    server: ScriptedServer, question: str, cwd: Path, *flags: str
) -> tuple[Any, Any, Recorder]:
    """initialize, session/new and one session/prompt; the three answers."""
    client = Recorder()
    command = agent_command(server, *flags)
    async with spawn_agent_process(client, command[0], *command[1:], env=agent_env(), cwd=cwd) as (
        connection,
        _process,
    ):
        initialized = await connection.initialize(
            protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
        )
        session = await connection.new_session(cwd=str(cwd), mcp_servers=[])
        response = await connection.prompt(session_id=session.session_id, prompt=[text_block(question)])
    return initialized, response, client


async def conversation(
    server: ScriptedServer, prompts: list[list[Any]], cwd: Path, *flags: str, cancel_after: float | None = None
) -> tuple[list[Any], Recorder]:
    """One session, its prompts one after the other; with `cancel_after`, the first
    prompt is cancelled that many seconds after it is sent."""
    client = Recorder()
    command = agent_command(server, *flags)
    responses = []
    async with spawn_agent_process(client, command[0], *command[1:], env=agent_env(), cwd=cwd) as (
        connection,
        _process,
    ):
        await connection.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
        session = await connection.new_session(cwd=str(cwd), mcp_servers=[])
        for blocks in prompts:
            sent = asyncio.create_task(connection.prompt(session_id=session.session_id, prompt=blocks))
            if cancel_after is not None:
                await asyncio.sleep(cancel_after)
                await connection.cancel(session_id=session.session_id)
                cancel_after = None
            responses.append(await sent)
    return responses, client


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, EXCHANGE_SECONDS))


def test_a_prompt_is_answered_over_acp_with_end_turn_and_llm_query_reaching_the_server(tmp_path: Path):
    document = tmp_path / "server.log"
    document.write_text(LOG)
    replies = [
        lua("errors = grep(context, 'ERROR')\nprint(#errors)"),
        lua("verdict = llm_query('which service fails most? ' .. errors[1].text)\nprint(verdict)"),
        lua("FINAL('gateway (' .. #errors .. ' errors; ' .. verdict .. ')')"),
    ]
    with ScriptedServer(replies, sub_answer=lambda prompt: "the gateway") as server:
        initialized, response, client = run(
            prompt_once(server, "Which service fails most often?", tmp_path, "--context", str(document))
        )
    assert initialized.protocol_version == PROTOCOL_VERSION
    assert response.stop_reason == "end_turn"
    assert client.reply() == "gateway (3 errors; the gateway)"
    # Three root turns, the question in the first, and the sub-call with the document's line.
    assert len(server.turns()) == 3
    assert "Which service fails most often?" in str(server.turns()[0]["messages"])
    (sub_call,) = server.sub_calls()
    assert sub_call["messages"][-1]["content"] == "which service fails most? ERROR gateway timeout"
    assert all(request["model"] == "scripted-model" for request in server.requests)


def test_the_iteration_cap_ends_a_prompt_with_max_turn_requests(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("nothing to see")
    with ScriptedServer([lua("print('still looking')")] * 3) as server:
        _, response, _ = run(prompt_once(server, "Anything?", tmp_path, "--max-iterations", "1"))
    assert response.stop_reason == "max_turn_requests"


def test_two_prompts_in_one_session_share_the_repl_state(tmp_path: Path):
    replies = [lua("count = 41\nFINAL('set')"), lua("FINAL(tostring(count + 1))")]
    with ScriptedServer(replies) as server:
        responses, client = run(
            conversation(server, [[text_block("Set it.")], [text_block("And now?")]], tmp_path)
        )
    assert [response.stop_reason for response in responses] == ["end_turn", "end_turn"]
    assert client.reply().endswith("42")
    # The second prompt went on with the same conversation: its first request has the first.
    second = server.turns()[1]["messages"]
    assert "Set it." in str(second) and "And now?" in str(second)


def test_an_embedded_resource_in_the_prompt_becomes_a_document_of_the_context(tmp_path: Path):
    replies = [lua("for _, d in ipairs(context) do print(d.name, #grep(d.text, 'ERROR')) end"), lua("FINAL('ok')")]
    resource = resource_block(embedded_text_resource("file:///logs/server.log", LOG))
    with ScriptedServer(replies) as server:
        responses, _ = run(conversation(server, [[text_block("How many errors?"), resource]], tmp_path))
    assert responses[0].stop_reason == "end_turn"
    printed = server.turns()[1]["messages"][-1]["content"]
    assert "file:///logs/server.log\t3" in printed


def test_a_cancelled_prompt_stops_with_cancelled(tmp_path: Path):
    replies = [lua("verdict = llm_query('slow')\nprint(verdict)"), lua("FINAL('too late')")]
    with ScriptedServer(replies, sub_delay=2.0) as server:
        started = time.monotonic()
        responses, client = run(conversation(server, [[text_block("Go.")]], tmp_path, cancel_after=0.5))
        seconds = time.monotonic() - started
    assert responses[0].stop_reason == "cancelled"
    assert "too late" not in client.reply()
    # The run stopped at the sub-call's end, the next safe point, not after another turn.
    assert len(server.turns()) == 1
    assert seconds < 15


def test_a_malformed_message_is_a_json_rpc_parse_error_and_the_agent_goes_on(tmp_path: Path):
    with ScriptedServer([]) as server:
        finished = subprocess.run(
            agent_command(server),
            input='{"jsonrpc": "2.0", "id": 1, "method": \n'
            '{"jsonrpc": "2.0", "id": 2, "method": "no/such", "params": {}}\n',
            capture_output=True,
            text=True,
            env=agent_env(),
            cwd=tmp_path,
            timeout=30,
        )
    assert finished.returncode == 0, finished.stderr
    answers = [json.loads(line) for line in finished.stdout.splitlines()]
    assert answers[0]["error"]["code"] == -32700
    assert answers[1]["id"] == 2 and answers[1]["error"]["code"] == -32601


def test_the_agent_ends_when_its_standard_input_closes(tmp_path: Path):
    with ScriptedServer([]) as server:
        finished = subprocess.run(
            agent_command(server), input="", capture_output=True, text=True, env=agent_env(), cwd=tmp_path, timeout=30
        )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == ""


def test_a_bad_setting_is_refused_before_any_message_is_read(tmp_path: Path):
    with ScriptedServer([]) as server:
        # Standard input stays open: the agent must fail without waiting on it.
        process = subprocess.Popen(
            agent_command(server, "--max-reply-tokens", "0"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=agent_env(),
            cwd=tmp_path,
        )
        try:
            status = process.wait(timeout=30)
            error = process.stderr.read() if process.stderr else ""
        finally:
            process.kill()
            process.communicate()
    assert status == 1
    assert error.strip() == "rlm acp: max_reply_tokens: a reply needs at least 1 token"
    assert server.requests == []


def test_token_flags_take_the_command_lines_text(tmp_path: Path):
    with ScriptedServer([]) as server:
        finished = subprocess.run(
            agent_command(server, "--context-window", "lots"),
            input="",
            capture_output=True,
            text=True,
            env=agent_env(),
            cwd=tmp_path,
            timeout=30,
        )
        assert finished.returncode == 1
        assert "context_window: `lots` is not a number of tokens" in finished.stderr
        finished = subprocess.run(
            agent_command(server, "--context-window", "128k", "--max-reply-tokens", "4k"),
            input="",
            capture_output=True,
            text=True,
            env=agent_env(),
            cwd=tmp_path,
            timeout=30,
        )
        assert finished.returncode == 0, finished.stderr
    assert server.requests == []


def test_a_usage_error_exits_with_argparse_status_2_naming_the_choices():
    finished = subprocess.run(
        [sys.executable, "-m", "rlm_registry", "acp", "--reasoning-effort", "extreme"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert finished.returncode == 2
    assert "invalid choice: 'extreme'" in finished.stderr


def test_flags_become_serve_acp_settings_and_flags_left_out_are_not_passed():
    parsed = _parser().parse_args(
        ["acp", "--no-cache", "--context", "a", "--context", "b", "--max-depth", "2", "--base-url", "http://x/v1"]
    )
    assert settings(parsed) == {"cache": False, "context": ["a", "b"], "max_depth": 2, "base_url": "http://x/v1"}
    assert settings(_parser().parse_args(["acp"])) == {}
    assert settings(_parser().parse_args(["acp", "--cache", "calls.db"])) == {"cache": "calls.db"}


def test_the_command_needs_a_subcommand():
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args([])
    assert exited.value.code == 2


async def load_after_restart(server: ScriptedServer, cwd: Path, state: Path) -> tuple[Any, Recorder, Any]:
    """A session with one prompt, the agent closed; a new agent on the same `state`
    loads it and asks a second prompt: its capabilities, its client, the answer."""
    command = agent_command(server, "--state-dir", str(state))
    first = Recorder()
    async with spawn_agent_process(first, command[0], *command[1:], env=agent_env(), cwd=cwd) as (connection, _):
        await connection.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
        session = await connection.new_session(cwd=str(cwd), mcp_servers=[])
        await connection.prompt(session_id=session.session_id, prompt=[text_block("Set it.")])
    second = Recorder()
    async with spawn_agent_process(second, command[0], *command[1:], env=agent_env(), cwd=cwd) as (connection, _):
        initialized = await connection.initialize(
            protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
        )
        await connection.load_session(cwd=str(cwd), session_id=session.session_id, mcp_servers=[])
        loaded = len(second.updates)
        response = await connection.prompt(session_id=session.session_id, prompt=[text_block("And now?")])
    return initialized, second, (loaded, response)


def test_a_session_kept_in_state_dir_loads_in_a_new_agent_with_its_repl_state(tmp_path: Path):
    replies = [lua("count = 41\nFINAL('set')"), lua("FINAL(tostring(count + 1))")]
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("nothing to see")
    with ScriptedServer(replies) as server:
        # The state folder outside the project: the project is the context, checked on load.
        initialized, client, (loaded, response) = run(load_after_restart(server, project, tmp_path / "state"))
        assert len(server.turns()) == 2, "the load asked the model nothing"
    assert initialized.agent_capabilities.load_session is True
    assert response.stop_reason == "end_turn"
    assert client.updates[0].session_update == "user_message_chunk"
    assert client.updates[0].content.text == "Set it."
    assert loaded > 1 and client.reply() == "set42"
