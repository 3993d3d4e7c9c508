"""The official Python ACP client (agent-client-protocol, module `acp`) loading a session
`rlm acp --state-dir` kept.

Usage: acp_python_load.py RLM_BINARY BASE_URL CWD STATE_DIR

Opens a session and asks one prompt with an embedded resource, closes the agent, starts
a new one on the same state folder, loads the session with `load_session` and asks a
second prompt; prints what it saw as JSON.
"""

import asyncio
import json
import os
import sys

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    embedded_text_resource,
    resource_block,
    text_block,
)
from acp.stdio import spawn_agent_process


class Collector:
    """A client that keeps every session update it is sent."""

    def __init__(self):
        self.updates = []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))

    async def request_permission(self, *args, **kwargs):
        raise RequestError.method_not_found("session/request_permission")


def spawn(collector, binary, base_url, cwd, state):
    env = {"PATH": os.environ.get("PATH", "")}
    args = ["acp", "--base-url", base_url, "--model", "test-model", "--state-dir", state]
    return spawn_agent_process(lambda _agent: collector, binary, *args, env=env, cwd=cwd)


async def main(binary, base_url, cwd, state):
    seen = {}
    live = Collector()
    async with spawn(live, binary, base_url, cwd, state) as (conn, _process):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        note = resource_block(embedded_text_resource("mem://note", "secret-7"))
        first = await conn.prompt(session_id=session, prompt=[text_block("Remember the note."), note])
        seen["first"] = first.stop_reason
    seen["live"] = live.updates
    loaded = Collector()
    async with spawn(loaded, binary, base_url, cwd, state) as (conn, _process):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        seen["load_session"] = init.agent_capabilities.load_session
        await conn.load_session(cwd=cwd, session_id=session, mcp_servers=[])
        seen["history"] = list(loaded.updates)
        second = await conn.prompt(session_id=session, prompt=[text_block("What was the note?")])
        seen["second"] = second.stop_reason
        seen["after"] = loaded.updates[len(seen["history"]):]
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
