#!/usr/bin/env bash
# `make chat`: talk to Klaw's agent with no API key and no Ollama. Starts the small local
# model the tests use (SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible server,
# set up on first use by scripts/setup-llm.sh into ${KLAW_CACHE:-~/.cache/klaw}/venv-llm)
# on a free loopback port, runs `klaw-engine chat` against it with the json tool protocol
# and a few tools, and stops the server when the chat ends (Ctrl-D, Ctrl-C or an error).
# Arguments are passed to `klaw-engine chat` (e.g. `--chat notes`).
#
# A 135M-parameter model is for trying the loop, not for real work: point
# KLAW_LLM_BASE_URL / KLAW_LLM_MODEL at a real model for that (doc/agent.md).
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE="${KLAW_CACHE:-$HOME/.cache/klaw}"
CARGO="${CARGO:-cargo}"

./scripts/setup-llm.sh
server="$CACHE/venv-llm/bin/klaw-llm-server"

# The engine first, so the model does not wait for a build.
"$CARGO" build --locked -q -p klaw-engine
engine="$("$CARGO" metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug/klaw-engine"

# The server reads nothing from its stdin but stops when it closes: it cannot outlive us.
coproc LLM { exec "$server" --port 0 --ctx 4096 --quiet --exit-on-stdin-eof; }
llm_pid="$LLM_PID"
stop() {
    kill "$llm_pid" 2>/dev/null || true
    wait "$llm_pid" 2>/dev/null || true
}
trap stop EXIT
read -r line <&"${LLM[0]}" || { echo "chat: the local model did not start" >&2; exit 1; }
url="${line#listening }"
case "$url" in http://127.0.0.1:*) ;; *) echo "chat: the local model said: $line" >&2; exit 1 ;; esac

printf 'chat: SmolLM2-135M at %s (tools: current_time, memory_save, memory_search, file_list, file_read); Ctrl-D ends\n' "$url" >&2
KLAW_LLM_PROVIDER=openai \
    KLAW_LLM_BASE_URL="$url/v1" \
    KLAW_LLM_MODEL=smollm2 \
    KLAW_LLM_API_KEY= \
    KLAW_LLM_PROTOCOL=json \
    KLAW_LLM_TOOLS=current_time,memory_save,memory_search,file_list,file_read \
    KLAW_LLM_TEMPERATURE=0 \
    KLAW_LLM_MAX_TOKENS=256 \
    "$engine" chat "$@"
