"""The official MCP Python SDK against `klaw-engine mcp` over stdio, on the protocol
beyond tools: resources (docs, a skill's files, core memory with a subscription),
prompts (a skill), completion, the approval policy asking through elicitation (answered
yes, then no) and, with the fixtures, sampling answered by a scripted model.

Run by klaw-engine/tests/mcp.rs: `python sdk_protocol.py <klaw-engine>` with HOME,
KLAW_CACHE, PATH and KLAW_WORKSPACE (a workspace with the skill `pdf`: SKILL.md,
scripts/fill.py, assets/pixel.png, and `leak`, a link to `$HOME/secret`) starts the
engine over stdio; `python sdk_protocol.py http://127.0.0.1:PORT/mcp` talks to a running
`klaw-engine mcp --http` started with such a workspace. Prints `ok <check>` per check
and exits non-zero on the first failure.
"""

import base64
import json
import os
import sys
import time

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from checks import check, engine_env, text_of

ENGINE = sys.argv[1]


def transport():
    if ENGINE.startswith("http"):
        return streamable_http_client(ENGINE)
    return stdio_client(StdioServerParameters(command=ENGINE, args=["mcp"], env=engine_env()))


async def main():
    async with transport() as streams:
        updates = []
        changed = []  # list_changed notifications, by kind
        answers = []  # what the elicitation callback answers, in turn
        asked = []
        sampled = []

        async def on_message(message):
            if isinstance(message, types.ResourceUpdatedNotification):
                updates.append(message.params.uri)
            elif isinstance(message, types.PromptListChangedNotification):
                changed.append("prompts")
            elif isinstance(message, types.ResourceListChangedNotification):
                changed.append("resources")

        async def on_elicit(context, params):
            asked.append(params.message)
            return types.ElicitResult(action=answers.pop(0), content={})

        async def on_sample(context, params):
            sampled.append(params)
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text="scripted answer"),
                model="scripted",
                stop_reason="endTurn",
            )

        async with ClientSession(
            streams[0], streams[1],
            message_handler=on_message,
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
        ) as session:
            init = await session.initialize()
            caps = init.capabilities
            check("resources, subscriptions, prompts and completions advertised",
                  caps.resources and caps.resources.subscribe and caps.prompts
                  and caps.completions is not None, caps)

            # Every resource, page after page.
            listed, cursor = [], None
            while True:
                page = await session.list_resources(
                    params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                listed += page.resources
                cursor = page.next_cursor
                if not cursor:
                    break
            uris = {str(r.uri): r for r in listed}
            for uri in ["klaw://docs/engine.md", "klaw://skills/pdf/SKILL.md",
                        "klaw://skills/pdf/scripts/fill.py", "klaw://skills/pdf/assets/pixel.png",
                        "klaw://memory/core"]:
                check(f"listed {uri}", uri in uris, sorted(uris)[:20])
            check("no link listed as a skill file", "klaw://skills/pdf/leak" not in uris, sorted(uris))
            check("a doc's MIME type and size", uris["klaw://docs/engine.md"].mime_type == "text/markdown"
                  and uris["klaw://docs/engine.md"].size > 1000, uris["klaw://docs/engine.md"])

            templates = await session.list_resource_templates()
            check("templates", {t.uri_template for t in templates.resource_templates}
                  >= {"klaw://docs/{path}", "klaw://skills/{name}/{file}"}, templates)

            doc = (await session.read_resource("klaw://docs/engine.md")).contents[0]
            check("read a doc", doc.mime_type == "text/markdown" and "## MCP" in doc.text, doc.mime_type)
            script = (await session.read_resource("klaw://skills/pdf/scripts/fill.py")).contents[0]
            check("read a skill's text file", script.text == "print('fill')\n", script)
            png = (await session.read_resource("klaw://skills/pdf/assets/pixel.png")).contents[0]
            check("read a skill's binary file as a blob", png.mime_type == "image/png"
                  and base64.b64decode(png.blob).startswith(b"\x89PNG"), png)

            # An attacker's URIs: refused with an error, nothing read.
            for uri in ["klaw://docs/../../../../etc/passwd", "klaw://docs/tools/../../secret",
                        "klaw://docs/%2e%2e/%2e%2e/etc/passwd", "klaw://docs//etc/passwd",
                        "klaw://skills/pdf/../../../../etc/passwd", "klaw://skills/pdf/leak",
                        "klaw://skills/../secret", "klaw://skills/pdf//etc/passwd",
                        "klaw://skills/pdf/%2e%2e/%2e%2e/secret", "klaw://skills/pdf",
                        "file:///etc/passwd", "klaw://memory/core/../../etc/passwd"]:
                try:
                    r = await session.read_resource(uri)
                    check(f"refused {uri}", False, r)
                except MCPError as e:
                    leaked = "root:" in e.message or "TOP SECRET" in e.message
                    check(f"refused {uri}", e.code in (-32602, -32002) and not leaked, e)

            # The skill as a prompt: SKILL.md, its files embedded, the task.
            prompts = await session.list_prompts()
            pdf = next(p for p in prompts.prompts if p.name == "pdf")
            check("a skill is a prompt with a task argument", pdf.description == "Fills PDF forms"
                  and [a.name for a in pdf.arguments] == ["task"], pdf)
            got = await session.get_prompt("pdf", {"task": "fill form.pdf"})
            kinds = [m.content.type for m in got.messages]
            check("the prompt: SKILL.md, the files as resources, the task",
                  kinds == ["text", "resource", "resource", "text"]
                  and "Use fill.py" in got.messages[0].content.text
                  and str(got.messages[1].content.resource.uri) == "klaw://skills/pdf/assets/pixel.png"
                  and got.messages[2].content.resource.text == "print('fill')\n"
                  and got.messages[3].content.text == "The task: fill form.pdf", got)
            try:
                await session.get_prompt("pfd")
                check("an unknown prompt is an error", False, "no error")
            except MCPError as e:
                check("an unknown prompt is an error naming the closest", "`pdf`" in e.message, e)

            # Completion.
            ref = types.ResourceTemplateReference(type="ref/resource", uri="klaw://docs/{path}")
            c = await session.complete(ref, {"name": "path", "value": "engi"})
            check("doc paths complete", "engine.md" in c.completion.values, c)
            ref = types.ResourceTemplateReference(type="ref/resource", uri="klaw://skills/{name}/{file}")
            c = await session.complete(ref, {"name": "name", "value": "p"})
            check("skill names complete", c.completion.values == ["pdf"], c)
            c = await session.complete(ref, {"name": "file", "value": "scr"}, {"name": "pdf"})
            check("a skill's files complete", c.completion.values == ["scripts/fill.py"], c)

            # Core memory: subscribed; a destructive call asks the user through elicitation.
            await session.subscribe_resource("klaw://memory/core")
            answers.append("accept")
            r = await session.call_tool("memory_core_update",
                                        {"section": "user", "key": "name", "value": "Ada"})
            check("accepted: the destructive call ran", not r.is_error and len(asked) == 1
                  and "memory_core_update" in asked[0] and "Ada" in asked[0], (r, asked))
            deadline = time.monotonic() + 5
            while not updates and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            check("the subscriber heard core memory change", updates == ["klaw://memory/core"], updates)
            core = json.loads((await session.read_resource("klaw://memory/core")).contents[0].text)
            check("core memory read", core["user"] == {"name": "Ada"}, core)

            for answer in ["decline", "cancel"]:
                answers.append(answer)
                r = await session.call_tool("memory_core_update",
                                            {"section": "user", "key": "name", "value": "Eve"})
                check(f"{answer}: refused with the reason", r.is_error
                      and ("declined" if answer == "decline" else "cancelled") in text_of(r), r)
            core = json.loads((await session.read_resource("klaw://memory/core")).contents[0].text)
            check("refused calls changed nothing", core["user"] == {"name": "Ada"}, core)
            r = await session.call_tool("current_time", {})
            check("a read-only call asks nobody", not r.is_error and len(asked) == 3, asked)

            await session.unsubscribe_resource("klaw://memory/core")
            answers.append("accept")
            updates.clear()
            await session.call_tool("memory_core_delete", {"section": "user", "key": "name"})
            await anyio.sleep(0.3)
            check("no update after unsubscribing", not updates, updates)

            # A skill added while the session is open: both lists change, and say so.
            check("lists change is advertised", caps.prompts.list_changed
                  and caps.resources.list_changed, caps)
            notes = os.path.join(os.environ["KLAW_WORKSPACE"], "skills", "notes")
            os.makedirs(notes)
            with open(os.path.join(notes, "SKILL.md"), "w") as f:
                f.write("---\nname: notes\ndescription: Takes notes\n---\nWrite it down.\n")
            deadline = time.monotonic() + 10
            while len(set(changed)) < 2 and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            check("a new skill: prompts and resources list_changed", set(changed) == {"prompts", "resources"}, changed)
            names = [p.name for p in (await session.list_prompts()).prompts]
            check("the new skill is a prompt", "notes" in names, names)

            tools = {t.name for t in (await session.list_tools()).tools}
            if "test_sampling" in tools:  # the engine was built with the fixtures
                r = await session.call_tool("test_sampling", {"prompt": "Say something"})
                check("sampling through the client's model", not r.is_error
                      and text_of(r) == "LLM response: scripted answer"
                      and sampled[0].messages[0].content.text == "Say something", r)


anyio.run(main)
print("ok all", flush=True)
