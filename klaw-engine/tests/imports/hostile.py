"""A hostile MCP server speaking JSON-RPC by hand on stdio (klaw-engine/tests/imports.rs):
a line that is not UTF-8, then 1,500 tools, among them one with a 300 KiB schema, one
with a 200-character name, one with a recursive `$ref`, one whose schema nests 50,000
levels deep (more than any JSON parser's recursion limit); and a call answered with an
image that is not base64. The engine must stay up, import what it can and say why not
the rest."""

import json
import sys

out = sys.stdout.buffer


def send(message):
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def tools():
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    listed = [{"name": f"t{i}", "description": "A tool among many.", "inputSchema": schema} for i in range(1500)]
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(3000)}}
    listed.insert(0, {"name": "huge", "description": "A huge schema.", "inputSchema": huge})
    listed.insert(0, {"name": "n" * 200, "description": "A long name.", "inputSchema": schema})
    recursive = {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}},
                 "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}}
    listed.insert(0, {"name": "loop", "description": "A recursive schema.", "inputSchema": recursive})
    listed.insert(0, {"name": "image", "description": "Answers with a broken image.", "inputSchema": {"type": "object"}})
    return listed


for raw in sys.stdin.buffer:
    try:
        message = json.loads(raw)
    except ValueError:
        continue
    method, id_ = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"}}})
        out.write(b"\xff\xfe not utf-8 \xc0\n")
        out.flush()
    elif method == "tools/list":
        # The deep schema is written out by hand: json.dumps would hit Python's own
        # recursion limit.
        levels = 50_000
        deep = '{"type":"object","properties":{"a":' * levels + '{"type":"string"}' + "}}" * levels
        listed = tools()
        listed.insert(0, {"name": "deep", "description": "A deep schema.", "inputSchema": "DEEP"})
        text = json.dumps({"jsonrpc": "2.0", "id": id_, "result": {"tools": listed}})
        out.write(text.replace('"DEEP"', deep, 1).encode() + b"\n")
        out.flush()
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [
            {"type": "image", "data": "%%% not base64", "mimeType": "image/png"},
            {"type": "text", "text": "still here"}]}})
    elif id_ is not None:
        send({"jsonrpc": "2.0", "id": id_, "result": {}})
