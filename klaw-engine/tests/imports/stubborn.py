"""An MCP server (JSON-RPC by hand on stdio) that will not stop: it ignores SIGTERM and
the end of its stdin, and has started a child that does the same
(klaw-engine/tests/imports.rs: the engine's stop still leaves neither behind, by killing
the server's process group). Its one tool `ping` answers "pong". Its arguments (a
`--mark=...`) label it and its child in /proc."""

import json
import signal
import subprocess
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
# The child inherits the ignored SIGTERM.
subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)", *sys.argv[1:]],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

out = sys.stdout.buffer


def send(message):
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


for raw in sys.stdin.buffer:
    message = json.loads(raw)
    method, id_ = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "stubborn", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id_, "result": {"tools": [
            {"name": "ping", "description": "Answers pong.", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "pong"}]}})
    elif id_ is not None:
        send({"jsonrpc": "2.0", "id": id_, "result": {}})

# stdin closed: stay anyway.
while True:
    time.sleep(1)
