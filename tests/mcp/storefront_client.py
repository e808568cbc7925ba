"""Drives Bazaar's storefront MCP server with the official Python MCP client.

Usage: storefront_client.py URL CREDENTIAL SCRIPT.json

SCRIPT is a JSON list of steps: {"tool": name, "arguments": {...}}, or
{"list_tools": true}. Arguments may name an earlier result with
"$N.path.to.field" (N = step index). Prints one JSON line per step:
{"step": N, "is_error": bool, "result": <structured content or tools>}.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


def resolve(value, results):
    if isinstance(value, str) and value.startswith("$"):
        head, _, path = value[1:].partition(".")
        current = results[int(head)]
        for part in filter(None, path.split(".")):
            current = current[int(part)] if isinstance(current, list) else current[part]
        return current
    if isinstance(value, dict):
        return {k: resolve(v, results) for k, v in value.items()}
    return value


async def main(url, credential, script):
    results = []
    headers = {"Authorization": f"Bearer {credential}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for n, step in enumerate(script):
                if step.get("list_tools"):
                    listed = await session.list_tools()
                    result = [tool.name for tool in listed.tools]
                    is_error = False
                else:
                    arguments = resolve(step.get("arguments", {}), results)
                    called = await session.call_tool(step["tool"], arguments)
                    is_error = bool(called.isError)
                    result = called.structuredContent
                    if result is None and called.content:
                        result = json.loads(called.content[0].text)
                results.append(result)
                print(json.dumps({"step": n, "is_error": is_error, "result": result}), flush=True)


if __name__ == "__main__":
    url, credential, script_file = sys.argv[1:4]
    with open(script_file) as f:
        script = json.load(f)
    asyncio.run(main(url, credential, script))
