# The tasks people run. `make run` and `make test` are the README's Quick start.
CARGO ?= cargo

.PHONY: setup run test lint fmt bench ui doc

## Install and fetch everything (idempotent; caches under ~/.cache/klaw).
setup:
	./scripts/setup.sh

## Set up, then run the engine on its embedded defaults: doctor, then the tool list.
run: setup
	$(CARGO) run --release --locked -p klaw-engine --

## Set up, then run the whole test suite (unit, integration, trybuild UI, doc tests).
test: setup
	INSTA_UPDATE=no $(CARGO) test --locked --workspace --all-features

## The quality gates CI runs besides the tests.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets --all-features -- -D warnings

fmt:
	$(CARGO) fmt --all

## Benchmarks (criterion): dispatch overhead and cold start.
bench: setup
	$(CARGO) bench --locked -p klaw-tools --bench dispatch
	$(CARGO) bench --locked -p klaw-engine --bench cold_start

## Re-generate the trybuild .stderr files after changing a macro message (review the diff!).
ui:
	TRYBUILD=overwrite $(CARGO) test --locked -p klaw --test ui

doc:
	$(CARGO) doc --no-deps --workspace --all-features
