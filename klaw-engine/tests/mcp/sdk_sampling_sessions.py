"""Sampling sessions do not see each other, through the official MCP Python SDK over HTTP:
`klaw-engine run` with KLAW_LLM_PROVIDER=mcp-sampling, `mcp.enabled`, a token and a
per-second scheduled job (`JOB-TICK`). Two clients that offer sampling connect, `klaw-a`
first and `klaw-b` second (the most recent one: where sampling used to go); `klaw-a`
spawns a subagent (`TASK-A`).

- `python sdk_sampling_sessions.py <url> <token> none`: A's subagent is sampled by A
  alone, B is asked nothing, and the scheduled job (no session started it) is sampled
  through neither.
- `... named`: the engine names `klaw-b` in `llm.samplingClient`: A's subagent is still
  A's alone, and the job is sampled through B and never through A.

Run by klaw-engine/tests/mcp.rs. Prints `ok <check>` per check and exits non-zero on
the first failure.
"""

import sys
import time

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from checks import check

URL, TOKEN, MODE = sys.argv[1], sys.argv[2], sys.argv[3]


def texts(params):
    return " ".join(getattr(m.content, "text", "") for m in params.messages)


def client(name, asked):
    """A session's transport and its sampling callback, recording what it is asked."""
    replies = {"n": 0}

    async def on_sample(context, params):
        asked.append(params)
        if "TASK-A" in texts(params):
            replies["n"] += 1
            text = "TOOL: current_time\nTOOL_PARAMS: {\"timezone\": \"UTC\"}" if replies["n"] == 1 else "A is done."
        else:
            text = "Nothing to do."
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model=name,
            stop_reason="endTurn",
        )

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    return http, on_sample


async def main():
    asked_a, asked_b = [], []
    http_a, sample_a = client("klaw-a", asked_a)
    http_b, sample_b = client("klaw-b", asked_b)
    async with http_a, http_b, streamable_http_client(URL, http_client=http_a) as sa, \
            streamable_http_client(URL, http_client=http_b) as sb:
        async with ClientSession(sa[0], sa[1], sampling_callback=sample_a,
                                 client_info=types.Implementation(name="klaw-a", version="1")) as a, \
                ClientSession(sb[0], sb[1], sampling_callback=sample_b,
                              client_info=types.Implementation(name="klaw-b", version="1")) as b:
            await a.initialize()
            await b.initialize()
            r = await a.call_tool("subagent_spawn", {"name": "a", "message": "TASK-A: tell the time in UTC"})
            check("A's subagent started", not r.is_error, r)
            # The subagent asks twice (a tool call, then its answer); the job fires every
            # second meanwhile. Then a few more seconds for anything sent elsewhere.
            deadline = time.monotonic() + 30
            while sum("TASK-A" in texts(p) for p in asked_a) < 2 and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            await anyio.sleep(4)
            a_tasks = [p for p in asked_a if "TASK-A" in texts(p)]
            check("A's subagent ran on A's model", len(a_tasks) >= 2, [texts(p) for p in asked_a])
            check("B was never asked A's work", not any("TASK-A" in texts(p) for p in asked_b),
                  [texts(p) for p in asked_b])
            check("A was asked nothing but its own work", len(a_tasks) == len(asked_a),
                  [texts(p) for p in asked_a])
            jobs_b = [p for p in asked_b if "JOB-TICK" in texts(p)]
            if MODE == "none":
                check("no client was asked the scheduled job", not asked_b, [texts(p) for p in asked_b])
            else:
                check("the named client B was asked the scheduled job", jobs_b and len(jobs_b) == len(asked_b),
                      [texts(p) for p in asked_b])


anyio.run(main)
print("ok all", flush=True)
