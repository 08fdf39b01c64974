"""A FastMCP server Klaw imports in klaw-engine/tests/imports.rs, over stdio, or with
`--http PORT` over Streamable HTTP at http://127.0.0.1:PORT/mcp.

Its tools: `add` (structured), `slow` (progress, then waits; to cancel), `crash` (the
process exits mid-call), `fail` (an error result), `grow` (adds the tool `grown` and
sends tools/list_changed), `trace` (the W3C `traceparent` its call's `_meta` carried, for
klaw-engine/tests/telemetry.rs), `touch`, `touch_tagged` and `touch_safe` (each writes a
mark file: no annotations, annotations without `destructiveHint`, `destructiveHint:
false`), and `bad_schema`, whose argument name Klaw refuses (it is not
ASCII), so that tool alone fails to import.
"""

import asyncio
import os
import sys

import mcp.types as mcp_types
from fastmcp import Context, FastMCP

mcp = FastMCP("klaw-test")


@mcp.tool
def add(a: int, b: int) -> int:
    """Adds two whole numbers."""
    return a + b


@mcp.tool
async def slow(ctx: Context, seconds: float = 600) -> str:
    """Reports progress, then waits `seconds`; a cancelled call writes "cancelled" to
    the file named by KLAW_TEST_CANCELLED (the test's proof that the cancel arrived)."""
    await ctx.report_progress(1, 2, "halfway")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        mark = os.environ.get("KLAW_TEST_CANCELLED")
        if mark:
            with open(mark, "w") as f:
                f.write("cancelled")
        raise
    return "slept"


@mcp.tool
def crash() -> str:
    """Exits the server in the middle of the call."""
    os._exit(3)


@mcp.tool
def fail() -> str:
    """Always fails."""
    raise ValueError("this tool always fails")


@mcp.tool
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and says the tool list changed."""

    def grown() -> str:
        """A tool added at run time."""
        return "grown"

    mcp.add_tool(grown)
    await ctx.send_notification(mcp_types.ToolListChangedNotification())
    return "grew"


@mcp.tool
def trace(ctx: Context) -> str:
    """The W3C traceparent the call's `_meta` carried ("none" without one)."""
    rc = ctx.request_context
    meta = rc.meta if rc is not None else None
    if isinstance(meta, dict):
        value = meta.get("traceparent")
    else:
        value = getattr(meta, "traceparent", None)
        if value is None and meta is not None:
            value = (getattr(meta, "model_extra", None) or {}).get("traceparent")
    return value or "none"


def _touch(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return "written"


@mcp.tool
def touch(path: str) -> str:
    """Writes a mark file; no annotations at all (the common case)."""
    return _touch(path, "touch")


@mcp.tool(annotations={"title": "Touch, tagged", "openWorldHint": False})
def touch_tagged(path: str) -> str:
    """Writes a mark file; annotations without destructiveHint."""
    return _touch(path, "touch_tagged")


@mcp.tool(annotations={"destructiveHint": False})
def touch_safe(path: str) -> str:
    """Writes a mark file; the server says it is not destructive."""
    return _touch(path, "touch_safe")


@mcp.tool
def bad_schema(город: str) -> str:
    """An argument name Klaw's schema checks refuse."""
    return город


if __name__ == "__main__":
    # `--mark=...` arguments only label the process, so a test can find it in /proc.
    args = [a for a in sys.argv[1:] if not a.startswith("--mark=")]
    if len(args) == 2 and args[0] == "--http":
        mcp.run(transport="http", host="127.0.0.1", port=int(args[1]), show_banner=False, log_level="error")
    else:
        mcp.run(show_banner=False)
