"""The official MCP Python SDK against `klaw-engine mcp`, over stdio or HTTP.

Run by klaw-engine/tests/mcp.rs: `python sdk_client.py <klaw-engine>` starts the engine
over stdio (with this process's HOME, KLAW_CACHE, PATH); `python sdk_client.py
http://127.0.0.1:PORT/mcp` talks to a running `klaw-engine mcp --http`. Prints
`ok <check>` per check and exits non-zero on the first failure.
"""

import base64
import os
import sys
import time

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from checks import check, engine_env, text_of

ENGINE = sys.argv[1]




def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


# `sleep <MARK>`: found by its command line, whatever PID namespace it runs in; unique
# to this run (several runs of this script may be under way at once).
MARK = str(900000 + os.getpid())


def sleepers():
    """The live host pids of `sleep <MARK>`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sleep", MARK.encode()] and alive(entry):
                    found.append(entry)
        except OSError:
            pass
    return found


def transport():
    if ENGINE.startswith("http"):
        return streamable_http_client(ENGINE)
    return stdio_client(StdioServerParameters(command=ENGINE, args=["mcp"], env=engine_env()))


async def main():
    async with transport() as streams:
        read, write = streams[0], streams[1]
        logs = []

        async def on_log(params):
            logs.append(params)

        async with ClientSession(read, write, logging_callback=on_log) as session:
            init = await session.initialize()
            check("initialize", init.server_info.name == "klaw-engine", init)
            check("tools list_changed advertised", init.capabilities.tools.list_changed is True, init.capabilities)

            listed = await session.list_tools()
            names = [t.name for t in listed.tools]
            check("tools listed in name order", names == sorted(names) and "file_read" in names and "exec" in names, names)
            by_name = {t.name: t for t in listed.tools}
            check("annotations", by_name["file_read"].annotations.read_only_hint is True
                  and by_name["file_delete"].annotations.destructive_hint is True, by_name["file_read"].annotations)
            check("output schemas", any(t.output_schema for t in listed.tools), "no tool has an outputSchema")
            check("titles in the configured language", by_name["file_read"].title == "Чтение файла", by_name["file_read"])

            if "test_tool_with_logging" in by_name:  # the engine was built with the fixtures
                check("logging advertised", init.capabilities.logging is not None, init.capabilities)
                await session.set_logging_level("warning")
                await session.call_tool("test_tool_with_logging", {})
                await anyio.sleep(0.3)
                check("messages below the set level are not sent", not logs, logs)
                await session.set_logging_level("debug")
                r = await session.call_tool("test_tool_with_logging", {})
                deadline = time.monotonic() + 5
                while len(logs) < 3 and time.monotonic() < deadline:
                    await anyio.sleep(0.05)
                check("log messages in order, from the tool", not r.is_error
                      and [m.data for m in logs] == ["Tool execution started", "Tool processing data", "Tool execution completed"]
                      and all(m.logger == "test_tool_with_logging" and m.level == "info" for m in logs), logs)

                r = await session.call_tool("test_multiple_content_types", {})
                kinds = [c.type for c in r.content]
                image = next(c for c in r.content if c.type == "image")
                check("attachments follow the text as content blocks", kinds == ["text", "image", "resource"]
                      and image.mime_type == "image/png"
                      and base64.b64decode(image.data).startswith(b"\x89PNG")
                      and r.content[2].resource.text == "This is an embedded resource content.", r)

            # A client without elicitation is not asked: a destructive call runs (the
            # client confirms calls itself, from the destructiveHint).
            r = await session.call_tool("memory_core_update", {"section": "user", "key": "tz", "value": "UTC"})
            check("a destructive call of a client without elicitation runs unasked", not r.is_error, r)

            r = await session.call_tool("current_time", {"timezone": "UTC"})
            check("call: structured result and a text copy", not r.is_error
                  and r.structured_content["timezone"] == "UTC" and "UTC" in text_of(r), r)

            r = await session.call_tool("current_time", {"timezone": 5})
            check("bad arguments are isError with the CLI's message", r.is_error
                  and text_of(r).startswith("Error [invalid_arguments]: /timezone"), r)

            try:
                await session.call_tool("no_such_tool", {})
                check("unknown tool is a JSON-RPC error", False, "no error")
            except MCPError as e:
                check("unknown tool is a JSON-RPC error", e.code == -32602 and "unknown tool" in e.message, e)

            r = await session.call_tool("file_read", {"path": "../../../../etc/passwd"})
            check("path escape is isError and leaks nothing", r.is_error
                  and "Access denied" in text_of(r) and "root:" not in text_of(r), r)

            # Cancelling the request (the SDK sends notifications/cancelled when the
            # caller abandons it) ends the command's processes.
            check("no sleeper before", not sleepers(), sleepers())
            running = []
            with anyio.move_on_after(60) as scope:
                async with anyio.create_task_group() as tg:
                    async def long_call():
                        await session.call_tool("exec", {"command": f"sleep {MARK} & wait", "timeout": 300})
                    tg.start_soon(long_call)
                    while not running:
                        await anyio.sleep(0.05)
                        running = sleepers()
                    tg.cancel_scope.cancel()
            check("the long command ran", running and not scope.cancelled_caught, "no sleeper in 60 s")
            deadline = time.monotonic() + 10
            while sleepers() and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            check("cancellation killed the command's process", not sleepers(), sleepers())
            r = await session.call_tool("current_time", {})
            check("the session goes on after a cancellation", not r.is_error, r)

            # Progress: memory_save embeds a long text and reports its chunks.
            reports = []

            async def on_progress(progress, total, message):
                reports.append((progress, total, message))

            text = " ".join(f"Sentence {i} about the long text that memory cuts into chunks." for i in range(400))
            r = await session.call_tool("memory_save", {"content": text}, progress_callback=on_progress)
            check("memory_save of a long text", not r.is_error, text_of(r))
            deadline = time.monotonic() + 5
            while not reports and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            check("progress notifications received", reports and reports[-1][1] and reports[-1][0] == reports[-1][1], reports)


anyio.run(main)
print("ok all", flush=True)
