"""What the client scripts of this folder share: one check line each, a result's text,
and the engine's environment for a server started over stdio."""

import os


def check(name, cond, detail=""):
    """Prints `ok <name>`, or exits with `FAILED <name>: <detail>`."""
    if not cond:
        raise SystemExit(f"FAILED {name}: {detail}")
    print(f"ok {name}", flush=True)


def text_of(result):
    """The text blocks of a tool result, joined."""
    return "".join(getattr(c, "text", "") for c in result.content)


def engine_env():
    """The variables the engine needs (the rest of this process's are not passed)."""
    keep = ("HOME", "KLAW_CACHE", "KLAW_CONFIG", "PATH", "KLAW_LOG_LEVEL", "KLAW_WORKSPACE", "KLAW_LLM_PROVIDER")
    return {k: v for k, v in os.environ.items() if k in keep}
