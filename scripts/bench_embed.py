#!/usr/bin/env python3
"""Embedding throughput with Python onnxruntime, the counterpart of klaw-memory/benches/embed.rs.

Run with: ~/.cache/klaw/venv/bin/python scripts/bench_embed.py
KLAW_EMBED_MODEL picks another model: a name under $KLAW_CACHE/models/ (all-minilm-l6-v2) or a
model directory. Same texts, batch 32, the model's passage prefix (`passage: ` for e5), tokenisation included, sorted by length and padded
within the batch (all texts in a set have about the same length), intra-op threads = CPU count,
spinning off, as the Rust Embedder.
"""
import json
import os
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

CACHE = os.environ.get("KLAW_CACHE") or os.path.expanduser("~/.cache/klaw")
MODEL = os.environ.get("KLAW_EMBED_MODEL") or "multilingual-e5-small"
MODEL_DIR = MODEL if "/" in MODEL else os.path.join(CACHE, "models", MODEL)
BATCH = 32
LONG = ("Klaw keeps notes for the agent: what the user asked, what was decided and "
        "why, which files changed and which commands ran. Each note is split into chunks, every chunk "
        "is embedded and stored beside its text, and a search combines the words with the meaning. "
        "Память хранит заметки агента: что спросил пользователь, что решили и почему. ")


def main():
    meta = json.load(open(os.path.join(MODEL_DIR, "klaw-model.json")))
    prefix, output = meta.get("passage_prefix", ""), meta.get("output", "sentence_embedding")
    tok = Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
    # the pad id as the Rust side picks it; then no baked-in padding, truncation at max_tokens
    pad = (tok.padding or {}).get("pad_id", tok.token_to_id("<pad>") or 0)
    tok.no_padding()
    tok.enable_truncation(meta.get("max_tokens", 512))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 1
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    sess = ort.InferenceSession(os.path.join(MODEL_DIR, "model.onnx"), opts,
                                providers=["CPUExecutionProvider"])
    types = "token_type_ids" in [i.name for i in sess.get_inputs()]
    sets = {
        "short": [f"note {i}: the meeting moved to Thursday" for i in range(BATCH)],
        "long": [f"{i}. {LONG * 2}" for i in range(BATCH)],
    }

    def embed(texts):
        encs = [tok.encode(prefix + t).ids for t in texts]
        order = sorted(range(len(encs)), key=lambda i: len(encs[i]))
        seq = max(len(e) for e in encs)
        ids = np.full((len(encs), seq), pad, dtype=np.int64)
        mask = np.zeros((len(encs), seq), dtype=np.int64)
        for row, i in enumerate(order):
            ids[row, :len(encs[i])] = encs[i]
            mask[row, :len(encs[i])] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if types:
            feed["token_type_ids"] = np.zeros_like(ids)
        out = sess.run([output], feed)[0]
        if out.ndim == 3:  # per-token states: mean over the mask, then L2
            out = (out * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out /= np.linalg.norm(out, axis=1, keepdims=True)
        res = np.empty_like(out)
        res[order] = out
        return res

    for name, texts in sets.items():
        ntok = sum(len(tok.encode(prefix + t).ids) for t in texts) / len(texts)
        embed(texts)  # warm-up
        runs, start = 0, time.perf_counter()
        while time.perf_counter() - start < 10 or runs < 10:
            embed(texts)
            runs += 1
        per_batch = (time.perf_counter() - start) / runs
        print(f"{meta['name']} {name}: {ntok:.1f} tokens/text, {per_batch * 1000:.1f} ms per batch of {BATCH}, "
              f"{BATCH / per_batch:.1f} texts/s")


if __name__ == "__main__":
    main()
