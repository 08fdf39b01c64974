#!/usr/bin/env python3
"""Regenerates `klaw-engine/hot-text.ld`: the functions an engine runs from its start to
answering `tools/list` and 200 `tools/call`s, then idle for 3 s (when it gives free
memory back), which the release link places side by side
(`klaw-engine/build.rs`). Run after a dependency or toolchain update (a new dependency
of a Klaw crate changes the build hashes of its functions, which the kept names carry),
on a release build of the MCP bench (it is the engine with `KLAW_BENCH_SERVE` set):
`make hot-text`, or

    KLAW_HOT_TEXT=0 cargo bench --no-run -p klaw-engine --bench mcp
    scripts/hot-text.py target/release/deps/mcp-<hash>

(a binary linked with the list would not do: valgrind sees only the code in `.text`).

The list's header keeps a fingerprint of what those hashes come from (`Cargo.lock`, the
workspace's manifests, `rustc -V`); a release build whose own differs warns that the
list is stale. `scripts/hot-text.py --check <binary> [list]` says how many of the
listed functions a binary linked with the list has in its hot section (`make bench`
runs it); an edit that moves the hot path onto new functions needs a new profile.

A function whose code sits in a section named after another symbol (rustc renames some
instances) is found by its section in the libraries beside the binary (objdump).

Needs valgrind (callgrind) and binutils' nm and objdump. Standard library only."""
import bisect, collections, json, os, re, subprocess, sys, tempfile, time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT = os.path.join(ROOT, "klaw-engine/hot-text.ld")


def fingerprint():
    """What the build hashes the list's names carry come from: `Cargo.lock`, the
    workspace's manifests and the compiler. FNV-1a (64 bits) over each file's path and
    bytes, then `rustc -V`; `klaw-engine/build.rs` computes the same and warns when a
    release build's differs from the one the list was made with."""
    h = 0xcbf29ce484222325

    def eat(data):
        nonlocal h
        for b in data:
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF

    files = ["Cargo.lock", "Cargo.toml"] + sorted(
        f"{d}/Cargo.toml" for d in os.listdir(ROOT)
        if os.path.isfile(os.path.join(ROOT, d, "Cargo.toml")))
    for f in files:
        eat(f.encode() + b"\0")
        with open(os.path.join(ROOT, f), "rb") as data:
            eat(data.read())
        eat(b"\0")
    rustc = os.environ.get("RUSTC", "rustc")
    eat(subprocess.run([rustc, "-V"], capture_output=True, check=True).stdout.strip())
    return f"{h:016x}"


def executed(binary):
    """The addresses of the instructions of `binary` run during the exchange (callgrind)."""
    out = tempfile.mktemp(suffix=".callgrind")
    env = {"KLAW_BENCH_SERVE": "1", "HOME": tempfile.mkdtemp(), "PATH": os.environ["PATH"],
           "KLAW_LOG_LEVEL": "error",
           "KLAW_CACHE": os.environ.get("KLAW_CACHE", os.path.expanduser("~/.cache/klaw"))}
    p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          "--dump-instr=yes", "--compress-pos=no", "-q", binary, "mcp"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def request(i, method, params):
        line = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        p.stdin.write((line + "\n").encode())
        p.stdin.flush()
        while True:
            v = json.loads(p.stdout.readline())
            if v.get("id") == i:
                return v

    request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "hot-text", "version": "1"}})
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    assert request(2, "tools/list", {})["result"]["tools"]
    call = {"name": "convert_temperature",
            "arguments": {"value": 21.5, "scale": "C", "target": "F"}}
    for i in range(200):
        assert "result" in request(10 + i, "tools/call", call)
    # Then idle: after a second without calls the engine gives the allocator's free
    # memory back (`release_memory_when_idle`); left out, the code that runs then was
    # faulted in, 64 KB windows of it, in every long-running engine (1.0-1.4 MB).
    time.sleep(3)
    p.stdin.close()
    p.wait()
    objects, current, addresses = {}, "", set()
    for line in open(out, errors="replace"):
        m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?$", line.strip())
        if m:
            kind, i, name = m.groups()
            if name:
                objects[i] = name
            if kind == "ob":
                current = objects.get(i, "")
        elif line.startswith("0x") and os.path.realpath(current) == os.path.realpath(binary):
            addresses.add(int(line.split()[0], 16))
    os.unlink(out)
    return addresses


def unsuffixed(name):
    """`name` with LLVM's suffix as a wildcard: the suffix (a hash of the code unit the
    function was promoted from) changes with any edit of that unit's code, and a name
    carries no other disambiguation than its build hash, so a pattern leaves it out."""
    return re.sub(r"\.llvm\.\d+$", ".llvm.*", name)


def loose(name):
    """`name` without its build hash either, which changes with the dependencies: where
    that is (nearly) unique, the pattern leaves it out too and survives a rebuild."""
    return unsuffixed(re.sub(r"17h[0-9a-f]{16}E(?=$|\.llvm\.)", "17h*", name))


def check(binary, listing=OUT):
    """How much of `hot-text.ld` a release `binary` linked with it has in `.text.klaw_hot`:
    a list made for another build (other dependencies, compiler, flags or features) names
    functions by build hashes this one does not have, and the linker skips those
    silently. Prints the share of the list's functions placed and warns (exit status 2)
    under 90%: `make bench` runs it before the MCP bench. What it cannot see is a new
    function on the hot path (that takes a profile: `make hot-text`)."""
    heads = subprocess.run(["objdump", "-h", "-w", binary], capture_output=True, text=True,
                           check=True).stdout
    hot = next((line.split() for line in heads.splitlines()
                if " .text.klaw_hot " in line), None)
    if hot is None:
        sys.exit(f"{binary} has no .text.klaw_hot: it was linked without hot-text.ld")
    start, size = int(hot[3], 16), int(hot[2], 16)
    placed_names = set()
    nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                        check=True).stdout
    for line in nm.splitlines():
        f = line.split(None, 2)
        if len(f) == 3 and start <= int(f[0], 16) < start + size:
            # Both forms a pattern may take (`main` writes one of them, and each both
            # promoted and not).
            placed_names.update((unsuffixed(f[2]), loose(f[2])))
    listed = placed = 0
    for line in open(listing):
        names = {re.sub(r"^\.text(\.unlikely|\.hot)?\.", "", t)
                 for t in re.findall(r"\.text\S*", line.split("(", 1)[-1].rstrip(")\n"))}
        names = {n for n in names if n.startswith(("_ZN", "_R"))}
        if not names:
            continue
        listed += 1
        placed += not names.isdisjoint(placed_names)
    share = placed / max(listed, 1)
    print(f"hot-text: {placed} of the {listed} functions {os.path.relpath(listing, ROOT)} "
          f"lists are in {os.path.basename(binary)}'s .text.klaw_hot ({share:.0%})")
    if share < 0.9:
        print("hot-text: the list is stale (made for other dependencies, another compiler, "
              "other flags or features); regenerate it with `make hot-text` before measuring",
              file=sys.stderr)
        sys.exit(2)


def main():
    if len(sys.argv) < 2 or (sys.argv[1] == "--check" and len(sys.argv) < 3):
        sys.exit("usage: scripts/hot-text.py <binary linked without the list>\n"
                 "       scripts/hot-text.py --check <binary linked with it> [list]")
    if sys.argv[1] == "--check":
        return check(*map(os.path.abspath, sys.argv[2:4]))
    binary = os.path.abspath(sys.argv[1])
    # Valgrind knows a binary's code only within its `.text`: the code a list placed in
    # `.text.klaw_hot` would show as an unknown object's and the list come out nearly empty.
    heads = subprocess.run(["objdump", "-h", binary], capture_output=True, text=True,
                           check=True).stdout
    if ".text.klaw_hot" in heads:
        sys.exit(f"{binary} was linked with hot-text.ld: profile a build made with "
                 "KLAW_HOT_TEXT=0 (make hot-text does)")
    symbols = []
    sizes = collections.defaultdict(int)
    nm = subprocess.run(["nm", "-n", "-S", "--defined-only", binary],
                        capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        f = line.split(None, 3)
        if len(f) == 4 and f[2] in "tTwW":
            symbols.append((int(f[0], 16), int(f[1], 16), f[3]))
            sizes[f[3]] += int(f[1], 16)
    starts = [s[0] for s in symbols]
    hot = {}
    for a in executed(binary):
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and symbols[i][0] <= a < symbols[i][0] + max(symbols[i][1], 1):
            hot[symbols[i][2]] = symbols[i][0]

    members = collections.defaultdict(list)
    for name in sizes:
        members[loose(name)].append(name)
    # The section each symbol sits in, where it is not named after it.
    sections = collections.defaultdict(set)
    libs = os.path.dirname(binary)
    for lib in sorted(os.listdir(libs)):
        if not lib.endswith(".rlib"):
            continue
        dump = subprocess.run(["objdump", "-t", os.path.join(libs, lib)],
                              capture_output=True, text=True).stdout
        for line in dump.splitlines():
            f = line.split()
            if len(f) >= 5 and " F .text" in line and f[-1] in hot:
                section = next(x for x in f if x.startswith(".text"))
                if not section.endswith(f[-1]):
                    sections[f[-1]].add(section)
    patterns, seen = [], set()
    for name in sorted(hot, key=hot.get):
        if name in ("_start", "main"):
            continue
        pattern = loose(name)
        same = members.get(pattern, [name])
        if len(same) > 2 or sum(sizes[m] for m in same) > 8192:
            pattern = unsuffixed(name)
        if pattern not in seen:
            seen.add(pattern)
            patterns.append(pattern)
        for section in sorted({unsuffixed(s) for s in sections.get(name, ())}):
            if section not in seen:
                seen.add(section)
                patterns.append(section)
    with open(OUT, "w") as f:
        f.write("/* Generated by scripts/hot-text.py: the functions an engine runs to answer\n"
                "   tools/list and tools/call, placed side by side (klaw-engine/build.rs).\n"
                f"   fingerprint: {fingerprint()} */\n")
        f.write("SECTIONS {\n  .text.klaw_hot : {\n")
        for p in patterns:
            # A promoted function (`.llvm.*`) may not be promoted in the next build, and
            # the other way round: each name is matched both ways (a pattern ending in
            # the hash's `*` already is).
            if p.endswith(".llvm.*"):
                forms = [p, p[:-len(".llvm.*")]]
            elif p.endswith("*"):
                forms = [p]
            else:
                forms = [p, p + ".llvm.*"]
            if p.startswith(".text"):
                f.write(f"    *({' '.join(forms)})\n")
            else:
                f.write("    *(" + " ".join(f".text{k}.{x}" for x in forms
                                         for k in ("", ".unlikely", ".hot")) + ")\n")
        f.write("  }\n}\nINSERT BEFORE .text;\n")
    print(f"{len(hot)} functions, {len(patterns)} patterns ({len(sections)} by their section)"
          f" -> {os.path.normpath(OUT)}")


main()
