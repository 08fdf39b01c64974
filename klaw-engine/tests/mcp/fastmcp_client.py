"""The FastMCP client against `klaw-engine mcp` over stdio.

Run by klaw-engine/tests/mcp.rs: `python fastmcp_client.py <klaw-engine>`. Prints
`ok <check>` per check and exits non-zero on the first failure.
"""

import asyncio
import sys

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from checks import check, engine_env, text_of

ENGINE = sys.argv[1]



async def main():
    async with Client(StdioTransport(command=ENGINE, args=["mcp"], env=engine_env())) as client:
        tools = await client.list_tools()
        names = [t.name for t in tools]
        check("list", "file_read" in names and names == sorted(names), names)
        r = await client.call_tool("current_time", {"timezone": "UTC"})
        check("call", not r.is_error and r.structured_content["timezone"] == "UTC", r)
        r = await client.call_tool("current_time", {"timezone": 5}, raise_on_error=False)
        check("bad arguments", r.is_error and text_of(r).startswith("Error [invalid_arguments]"), r)
        r = await client.call_tool("file_write", {"path": "note.txt", "content": "from fastmcp"})
        r = await client.call_tool("file_read", {"path": "note.txt"})
        check("write then read", "from fastmcp" in str(r.structured_content), r)


asyncio.run(main())
print("ok all", flush=True)
