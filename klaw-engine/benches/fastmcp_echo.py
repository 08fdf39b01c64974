"""FastMCP's equivalent of Klaw's fixture tool `echo`, for benches/mcp.rs: over stdio, or
with `--http PORT` over Streamable HTTP at http://127.0.0.1:PORT/mcp."""

import sys

from fastmcp import FastMCP

mcp = FastMCP("echo")


@mcp.tool
def echo(text: str) -> str:
    """Returns the text."""
    return text


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False, log_level="error")
    else:
        mcp.run(show_banner=False)
