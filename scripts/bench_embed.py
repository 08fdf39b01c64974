#!/usr/bin/env python3
"""Embedding throughput with Python onnxruntime, the counterpart of klaw-tools/benches/embed.rs.

Run with: ~/.cache/klaw/venv/bin/python scripts/bench_embed.py
Same texts, batch 32, `passage: ` prefix, tokenisation included, sorted by length and padded
within the batch (all texts in a set have about the same length), intra-op threads = CPU count,
spinning off, as the Rust Embedder.
"""
import os
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

CACHE = os.environ.get("KLAW_CACHE") or os.path.expanduser("~/.cache/klaw")
MODEL_DIR = os.path.join(CACHE, "models", "multilingual-e5-small")
BATCH = 32
LONG = ("Klaw keeps notes for the agent: what the user asked, what was decided and "
        "why, which files changed and which commands ran. Each note is split into chunks, every chunk "
        "is embedded and stored beside its text, and a search combines the words with the meaning. "
        "Память хранит заметки агента: что спросил пользователь, что решили и почему. ")


def main():
    tok = Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 1
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    sess = ort.InferenceSession(os.path.join(MODEL_DIR, "model.onnx"), opts,
                                providers=["CPUExecutionProvider"])
    sets = {
        "short": [f"note {i}: the meeting moved to Thursday" for i in range(BATCH)],
        "long": [f"{i}. {LONG * 2}" for i in range(BATCH)],
    }

    def embed(texts):
        encs = [tok.encode("passage: " + t).ids for t in texts]
        order = sorted(range(len(encs)), key=lambda i: len(encs[i]))
        seq = max(len(e) for e in encs)
        ids = np.ones((len(encs), seq), dtype=np.int64)
        mask = np.zeros((len(encs), seq), dtype=np.int64)
        for row, i in enumerate(order):
            ids[row, :len(encs[i])] = encs[i]
            mask[row, :len(encs[i])] = 1
        out = sess.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]
        res = np.empty_like(out)
        res[order] = out
        return res

    for name, texts in sets.items():
        ntok = sum(len(tok.encode("passage: " + t).ids) for t in texts) / len(texts)
        embed(texts)  # warm-up
        runs, start = 0, time.perf_counter()
        while time.perf_counter() - start < 10 or runs < 10:
            embed(texts)
            runs += 1
        per_batch = (time.perf_counter() - start) / runs
        print(f"{name}: {ntok:.1f} tokens/text, {per_batch * 1000:.1f} ms per batch of {BATCH}, "
              f"{BATCH / per_batch:.1f} texts/s")


if __name__ == "__main__":
    main()
