#!/usr/bin/env bash
# Sets up what Klaw needs to build and run (`make run`): the Rust toolchain check, the
# crates, bubblewrap, ONNX Runtime and the default embedding model. With `--test`
# (`make test`), also what the tests need: a headless Chromium, the other embedding
# models, the test clients (Python, Node 22, the conformance suite) and the small local
# LLM. With `--build` (`make run`), the engine is built (dev profile) once the crates are
# fetched, while the rest is set up: the downloads wait on the network, the build on the
# CPU. Idempotent: a second run only checks. Downloads are cached under ~/.cache/klaw
# (override with KLAW_CACHE).
set -euo pipefail

TEST=0
BUILD=0
case "${1:-}" in
    "") ;;
    --test) TEST=1 ;;
    --build) BUILD=1 ;;
    *) printf 'usage: %s [--test | --build]\n' "$0" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
CACHE="${KLAW_CACHE:-$HOME/.cache/klaw}"
mkdir -p "$CACHE"

say() { printf 'setup: %s\n' "$*"; }

# Rust toolchain: the one on the machine (rust-version in Cargo.toml).
if ! command -v cargo >/dev/null 2>&1; then
    say "cargo is not installed; install Rust 1.95 or newer from https://rustup.rs" >&2
    exit 1
fi
need="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
have="$(rustc --version | awk '{print $2}')"
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
    say "rustc $have is older than the required $need" >&2
    exit 1
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        say "installing $component"
        rustup component add "$component"
    fi
done

# Crates: fetched once into cargo's own cache (offline afterwards).
stamp="$CACHE/cargo-fetch.$(sha256sum Cargo.lock | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    say "fetching crates"
    cargo fetch --locked
    rm -f "$CACHE"/cargo-fetch.*
    touch "$stamp"
fi

# The build, beside the rest of the set-up; stopped if the set-up fails, waited for at
# the end (its failure is the script's).
build_pid=""
if [ "$BUILD" = 1 ]; then
    say "building the engine while the rest is set up"
    "${CARGO:-cargo}" build --locked -p klaw-engine &
    build_pid=$!
    trap 'if [ -n "$build_pid" ]; then kill "$build_pid" 2>/dev/null || true; fi' EXIT
fi
wait_build() {
    if [ -n "$build_pid" ]; then
        local pid="$build_pid"
        build_pid=""
        if ! wait "$pid"; then
            say "the build failed" >&2
            exit 1
        fi
    fi
}

# Debian packages, installed once (apt-get update at most once a day).
apt_install() {
    local why="$1"
    shift
    if ! command -v apt-get >/dev/null 2>&1; then
        say "apt-get is missing: install $* with your package manager ($why)" >&2
        return 0
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    say "installing $* ($why)"
    local stamp="$CACHE/apt-updated"
    if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440)" ]; then
        $sudo apt-get update -qq
        touch "$stamp"
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# bubblewrap: the sandbox of the shell tools (exec, process). Without it they fall back
# to Landlock + seccomp, or refuse to run. Skipped when bwrap is on PATH.
if ! command -v bwrap >/dev/null 2>&1; then
    apt_install "the shell tools' sandbox; without it they fall back to Landlock" bubblewrap
fi

if [ "$TEST" = 0 ]; then
    ./scripts/setup-models.sh default
    wait_build
    say "ok (cache: $CACHE; make test sets up the rest)"
    exit 0
fi

# A headless Chromium for render_js (Debian's, never a download). Without one render_js
# is not offered. Skipped when a Chromium or Chrome is on PATH.
browser=""
for b in chromium-headless-shell chrome-headless-shell chromium chromium-browser \
    google-chrome google-chrome-stable; do
    if command -v "$b" >/dev/null 2>&1; then browser="$b"; break; fi
done
if [ -z "$browser" ]; then
    apt_install "render_js's headless browser" chromium-headless-shell
fi

./scripts/setup-models.sh
./scripts/setup-test-tools.sh
wait_build
say "ok (cache: $CACHE)"
