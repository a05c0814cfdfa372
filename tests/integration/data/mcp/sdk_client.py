"""Connects the official MCP Python SDK's Client to `git-forum mcp` on stdio, as an editor does:
first with its default negotiation (a `server/discover` probe, the `initialize` handshake only
if that fails), then forcing the handshake. Prints what each connection negotiated.

Usage: python sdk_client.py GIT_FORUM_BINARY REPOSITORY
"""

import asyncio
import sys

from mcp import Client, StdioServerParameters


async def main() -> None:
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], cwd=sys.argv[2])
    async with Client(params) as client:
        print("auto", client.protocol_version)
        print("server", client.server_info.name if client.server_info else None)
        tools = await client.list_tools()
        print("tools", len(tools.tools))
        status = await client.call_tool("status", {})
        print("status_error", status.is_error)
    async with Client(params, mode="legacy") as client:
        print("legacy", client.protocol_version)
        tools = await client.list_tools()
        print("tools", len(tools.tools))


asyncio.run(main())
