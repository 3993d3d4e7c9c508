"""The official Python ACP client (agent-client-protocol, module `acp`) driving `rlm acp`.

Usage: acp_python_client.py RLM_BINARY BASE_URL CWD

Spawns the agent three times (default limits, --max-iterations 1, --max-llm-calls 1),
runs the scenario the Rust test scripts the model for, and prints what it saw as JSON.
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


def spawn(collector, binary, base_url, cwd, *flags):
    env = {"PATH": os.environ.get("PATH", "")}
    args = ["acp", "--base-url", base_url, "--model", "test-model", *flags]
    return spawn_agent_process(lambda _agent: collector, binary, *args, env=env, cwd=cwd)


async def main(binary, base_url, cwd):
    seen = {}
    collector = Collector()
    async with spawn(collector, binary, base_url, cwd) as (conn, _process):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        seen["initialize"] = init.model_dump(by_alias=True, exclude_none=True)
        session = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        stops = []
        note = resource_block(embedded_text_resource("mem://note", "secret-42"))
        first = await conn.prompt(session_id=session, prompt=[text_block("What does the note say?"), note])
        stops.append(first.stop_reason)
        second = await conn.prompt(session_id=session, prompt=[text_block("What was it again?")])
        stops.append(second.stop_reason)
        slow = asyncio.create_task(conn.prompt(session_id=session, prompt=[text_block("Take your time.")]))
        await asyncio.sleep(0.5)
        await conn.cancel(session_id=session)
        stops.append((await asyncio.wait_for(slow, 10)).stop_reason)
        try:
            await conn.prompt(session_id="no-such-session", prompt=[text_block("Q")])
            seen["unknown_session"] = None
        except RequestError as error:
            seen["unknown_session"] = error.code
        seen["updates"] = collector.updates
    for flag, value in (("--max-iterations", "1"), ("--max-llm-calls", "1")):
        other = Collector()
        async with spawn(other, binary, base_url, cwd, flag, value) as (conn, _process):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
            response = await conn.prompt(session_id=session, prompt=[text_block("Keep looking.")])
            stops.append(response.stop_reason)
    seen["stop_reasons"] = stops
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
