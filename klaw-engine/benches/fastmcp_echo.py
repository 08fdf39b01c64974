"""FastMCP's equivalent of Klaw's fixture tool `echo`, over stdio, for benches/mcp.rs."""

from fastmcp import FastMCP

mcp = FastMCP("echo")


@mcp.tool
def echo(text: str) -> str:
    """Returns the text."""
    return text


if __name__ == "__main__":
    mcp.run(show_banner=False)
