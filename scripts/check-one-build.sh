#!/usr/bin/env bash
# Whether `make test` reuses what `make run` built (issue 32): builds both ways (dev
# profile, the shared target/) and lists the units of the `make run` build that the test
# build compiles again. Only klaw-tools (its `testing` feature) and klaw-engine
# (`fixtures`) should be listed; anything else means a dev-dependency turns on a feature
# the engine's build lacks: add it to the list at the end of klaw-engine's
# [dependencies].
set -euo pipefail
cd "$(dirname "$0")/.."
run="$(mktemp)"
test="$(mktemp)"
trap 'rm -f "$run" "$test"' EXIT
cargo build --locked -p klaw-engine --message-format=json >"$run"
cargo test --locked --workspace --all-features --no-run --message-format=json >"$test"
python3 - "$run" "$test" <<'PY'
import json, sys

def units(path):
    out = []
    for line in open(path):
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-artifact":
            files = frozenset(f for f in m["filenames"] if "/deps/" in f or "/build/" in f)
            out.append((m["package_id"], m["target"]["name"], files))
    return out

run, test = units(sys.argv[1]), units(sys.argv[2])
built = set().union(*(u[2] for u in test))
again = [u for u in run if not u[2] <= built]
print(f"{len(run)} units in the engine's build; the test build compiles {len(again)} again:")
for pkg, target, _ in again:
    print(f"  {pkg.rsplit('/', 1)[-1]} ({target})")
# The workspace's own packages (path dependencies) may differ; nothing from a registry.
ours = all(pkg.startswith("path+") for pkg, _, _ in again)
sys.exit(0 if ours else 1)
PY
