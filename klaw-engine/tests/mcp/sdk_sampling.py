"""`llm.provider: "mcp-sampling"` through the official MCP Python SDK: `klaw-engine mcp`
over stdio with KLAW_LLM_PROVIDER=mcp-sampling serves `subagent_spawn`, and the
subagent's model is this client's sampling callback (a scripted model: first a tool
call in the text protocol, then an answer).

Run by klaw-engine/tests/mcp.rs: `python sdk_sampling.py <klaw-engine>`. Prints
`ok <check>` per check and exits non-zero on the first failure.
"""

import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from checks import check, engine_env

ENGINE = sys.argv[1]


async def main():
    params = StdioServerParameters(command=ENGINE, args=["mcp"], env=engine_env())
    async with stdio_client(params) as streams:
        asked = []
        replies = ["TOOL: current_time\nTOOL_PARAMS: {\"timezone\": \"UTC\"}", "It is done."]

        async def on_sample(context, params):
            asked.append(params)
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=replies.pop(0)),
                model="scripted",
                stop_reason="endTurn",
            )

        async with ClientSession(streams[0], streams[1], sampling_callback=on_sample) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            check("subagent_spawn is served with mcp-sampling", "subagent_spawn" in tools, sorted(tools))
            r = await session.call_tool("subagent_spawn", {"name": "clock", "message": "Tell the time in UTC"})
            check("the subagent started", not r.is_error and r.structured_content["status"] == "started", r)
            deadline = time.monotonic() + 20
            while len(asked) < 2 and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            check("the subagent asked the client's model twice", len(asked) == 2, asked)
            first, second = asked
            check("the system prompt and the task", "Klaw" in (first.system_prompt or "")
                  and "current_time" in first.system_prompt
                  and first.messages[-1].content.text == "Tell the time in UTC", first)
            texts = " ".join(getattr(m.content, "text", "") for m in second.messages)
            check("the tool's result went back to the model", "UTC" in texts
                  and len(second.messages) > len(first.messages), second.messages)


anyio.run(main)
print("ok all", flush=True)
