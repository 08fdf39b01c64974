#!/usr/bin/env bash
# The clients the test suite talks to the engine with: the official MCP Python SDK
# (scripts/requirements-test.txt) in its own venv under the cache. Idempotent: a venv
# built from the same requirements is kept.
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE="${KLAW_CACHE:-$HOME/.cache/klaw}"
VENV="$CACHE/venv-test"

say() { printf 'setup-test-tools: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 is not installed (Debian: apt-get install python3 python3-venv)"
req_key="$(sha256sum scripts/requirements-test.txt | cut -c1-16)"
if [ ! -f "$VENV/.klaw-req.$req_key" ]; then
    say "creating $VENV (mcp)"
    rm -rf "$VENV"
    python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt ||
        die "pip could not install scripts/requirements-test.txt into $VENV"
    touch "$VENV/.klaw-req.$req_key"
fi
