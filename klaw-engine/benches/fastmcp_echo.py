"""FastMCP's equivalent of the bench's tool `convert_temperature` (three arguments; the
same tool `benches/mcp.rs` links into Klaw's engine and `benches/rmcp-peer` gives
rmcp), for benches/mcp.rs: over stdio, or with `--http PORT` over Streamable HTTP at
http://127.0.0.1:PORT/mcp."""

import sys

from fastmcp import FastMCP

mcp = FastMCP("bench")

SCALES = {"C": "C", "CELSIUS": "C", "F": "F", "FAHRENHEIT": "F", "K": "K", "KELVIN": "K"}


def _scale(s: str) -> str:
    s = s.strip().upper()
    if s not in SCALES:
        raise ValueError(f"unknown scale `{s}`: use C, F or K")
    return SCALES[s]


@mcp.tool
def convert_temperature(value: float, scale: str, target: str = "C") -> str:
    """Convert a temperature between Celsius (C), Fahrenheit (F) and Kelvin (K)"""
    s = _scale(scale)
    c = value if s == "C" else (value - 32) * 5 / 9 if s == "F" else value - 273.15
    if c < -273.15:
        raise ValueError("below absolute zero")
    t = _scale(target)
    out = c if t == "C" else c * 9 / 5 + 32 if t == "F" else c + 273.15
    return f"{out:.2f} {target.upper()}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        # Kept-alive connections stay open while the bench's other clients connect (uvicorn
        # closes them after 5 s idle, which a loaded machine reaches with 64 clients).
        mcp.run(
            transport="http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            show_banner=False,
            log_level="error",
            uvicorn_config={"timeout_keep_alive": 120},
        )
    else:
        mcp.run(show_banner=False)
