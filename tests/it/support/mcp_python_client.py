"""Drives `rlm serve --http` with the official MCP Python SDK: resources, prompts,
logging and tools.

Usage: python mcp_python_client.py URL. Prints one JSON object with what it saw.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str) -> None:
    logged = []

    async def on_log(params) -> None:
        logged.append([params.level, params.logger, params.data])

    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log) as session:
            init = await session.initialize()
            caps = init.capabilities
            resources = await session.list_resources()
            word_count = await session.read_resource("rlm://functions/word_count")
            system = await session.read_resource("rlm://prompt/system")
            prompts = await session.list_prompts()
            prompt = await session.get_prompt("rlm", {"question": "How many words?"})
            await session.set_logging_level("info")
            call = await session.call_tool("run_lua", {"code": "print(word_count('a b c'))"})
            print(json.dumps({
                "capabilities": {
                    "resources": caps.resources is not None,
                    "prompts": caps.prompts is not None,
                    "logging": caps.logging is not None,
                },
                "resources": [str(r.uri) for r in resources.resources],
                "word_count": word_count.contents[0].text,
                "system": system.contents[0].text,
                "prompts": [
                    {"name": p.name, "arguments": [(a.name, a.required) for a in (p.arguments or [])]}
                    for p in prompts.prompts
                ],
                "prompt": prompt.messages[0].content.text,
                "run_lua": call.content[0].text,
                "logged": logged,
            }))


asyncio.run(main(sys.argv[1]))
