"""The FastMCP client against `klaw-engine mcp` over stdio.

Run by klaw-engine/tests/mcp.rs: `python fastmcp_client.py <klaw-engine>`. Prints
`ok <check>` per check and exits non-zero on the first failure.
"""

import asyncio
import os
import sys

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

ENGINE = sys.argv[1]


def check(name, cond, detail=""):
    if not cond:
        raise SystemExit(f"FAILED {name}: {detail}")
    print(f"ok {name}", flush=True)


async def main():
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "KLAW_CACHE", "PATH")}
    async with Client(StdioTransport(command=ENGINE, args=["mcp"], env=env)) as client:
        tools = await client.list_tools()
        names = [t.name for t in tools]
        check("list", "file_read" in names and names == sorted(names), names)
        r = await client.call_tool("current_time", {"timezone": "UTC"})
        check("call", not r.is_error and r.structured_content["timezone"] == "UTC", r)
        r = await client.call_tool("current_time", {"timezone": 5}, raise_on_error=False)
        text = "".join(getattr(c, "text", "") for c in r.content)
        check("bad arguments", r.is_error and text.startswith("Error [invalid_arguments]"), r)
        r = await client.call_tool("file_write", {"path": "note.txt", "content": "from fastmcp"})
        r = await client.call_tool("file_read", {"path": "note.txt"})
        check("write then read", "from fastmcp" in str(r.structured_content), r)


asyncio.run(main())
print("ok all", flush=True)
