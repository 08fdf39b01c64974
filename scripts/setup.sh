#!/usr/bin/env bash
# Sets up everything Klaw needs to build, run and test. Idempotent: a second run
# only checks. Downloads are cached under ~/.cache/klaw (override with KLAW_CACHE).
set -euo pipefail

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

# bubblewrap: the sandbox of the shell tools (exec, process). Without it they fall back
# to Landlock + seccomp, or refuse to run. Installed once; skipped when bwrap is on PATH.
if ! command -v bwrap >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        sudo=""
        if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
        say "installing bubblewrap (the shell tools' sandbox)"
        stamp="$CACHE/apt-updated"
        if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440)" ]; then
            $sudo apt-get update -qq
            touch "$stamp"
        fi
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
    else
        say "bubblewrap is not installed and apt-get is missing: install it with your package manager (shell commands fall back to Landlock)" >&2
    fi
fi

./scripts/setup-models.sh
./scripts/setup-test-tools.sh
say "ok (cache: $CACHE)"
