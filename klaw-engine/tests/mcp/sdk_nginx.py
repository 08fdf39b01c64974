"""The official MCP Python SDK through nginx in front of three engines.

Run by klaw-engine/tests/nginx.rs: `python sdk_nginx.py http://127.0.0.1:PORT/mcp`.
Sessions are routed by their id (`<engineId>.<uuid>`): several sessions, each on the
engine that made it, every call answered. Then a session's call is left in flight
(`exec sleep`), the script prints `INFLIGHT <session id>` and the test kills that
session's engine with SIGKILL: the call fails cleanly (an error, soon, no hang), the
next call of that session fails cleanly too, and a new session works on another engine.
Prints `ok <check>` per check and `ok all` at the end; exits non-zero on a failure.
"""

import sys
import time

import anyio
import httpx2
from mcp import ClientSession

from checks import check

URL = sys.argv[1]


def client(ids):
    """An HTTP client that notes the Mcp-Session-Id the server gives."""

    async def seen(response):
        sid = response.headers.get("mcp-session-id")
        if sid:
            ids.append(sid)

    return httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300), event_hooks={"response": [seen]})


async def session_calls(n_calls):
    """A new session through nginx making `n_calls` calls; its id."""
    from mcp.client.streamable_http import streamable_http_client

    ids = []
    async with client(ids) as http:
        async with streamable_http_client(URL, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                for _ in range(n_calls):
                    r = await s.call_tool("current_time", {"timezone": "UTC"})
                    if r.is_error:
                        check("a call through nginx", False, r)
    return ids[0]


async def main():
    from mcp.client.streamable_http import streamable_http_client

    # Several sessions: each lands on some engine, and all its calls reach it.
    engines = set()
    for _ in range(6):
        sid = await session_calls(5)
        engines.add(sid.split(".", 1)[0])
    check("sessions spread over the engines and every call answered", len(engines) >= 2, engines)

    ids = []
    async with client(ids) as http:
        async with streamable_http_client(URL, http_client=http, terminate_on_close=False) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                r = await s.call_tool("current_time", {"timezone": "UTC"})
                check("the session to be cut works", not r.is_error, r)
                sid = ids[0]
                print(f"INFLIGHT {sid}", flush=True)
                start = time.monotonic()
                failed = None
                with anyio.move_on_after(60):
                    try:
                        r = await s.call_tool("exec", {"command": "sleep 40", "timeout": 120})
                        failed = f"answered: {r}"
                    except Exception as e:  # the SDK's error for a lost stream
                        failed = e
                took = time.monotonic() - start
                check("the call in flight on the killed engine fails cleanly, soon",
                      isinstance(failed, Exception) and took < 30, f"{failed!r} after {took:.1f}s")
                with anyio.move_on_after(30):
                    try:
                        r = await s.call_tool("current_time", {"timezone": "UTC"})
                        failed = f"answered: {r}"
                    except Exception as e:
                        failed = e
                check("the dead engine's session fails cleanly", isinstance(failed, Exception), repr(failed))

    dead = sid.split(".", 1)[0]
    sid2 = await session_calls(3)
    check("the next session works on another engine", sid2.split(".", 1)[0] != dead, (sid, sid2))
    print("ok all", flush=True)


anyio.run(main)
