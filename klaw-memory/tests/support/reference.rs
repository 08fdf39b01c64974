//! The embedding reference, computed when the test runs: Python onnxruntime + tokenizers
//! (the venv `make setup` makes) on the same model directory and the same ONNX Runtime
//! build, so the numbers come from this machine's CPU kernels and hold on any CPU. A
//! reference taken once and written into a test would check the CPU it was taken on
//! (int8 kernels round differently from one CPU to the next), not the code.
//!
//! The reference does the work itself where it can: it tokenizes with the prefix, runs
//! each text alone (no padding), mean-pools `last_hidden_state` over the mask (even for a
//! model whose graph pools, such as multilingual-e5-small's `sentence_embedding`) and
//! L2-normalises. [`Variant`]s break one step each, so a test can show that the
//! comparison notices a broken prefix, pooling, normalisation or tokenizer.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use klaw_memory::{EmbedderConfig, TextKind};

/// How far a Rust vector may be from the reference, per component. Rust and Python run
/// the same library on the same CPU; they differ only by summation order in pooling
/// (measured ~1e-7). Embeddings of one text on two CPUs differed by up to 6e-4, and a
/// broken step moves them by 1e-2 or more (see [`Variant`]).
pub(crate) const TOLERANCE: f32 = 1e-4;

/// One step of the pipeline done wrong, for showing that the comparison fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// The pipeline as it should be.
    Correct,
    /// No `query: ` / `passage: ` prefix.
    NoPrefix,
    /// The other prefix (a query embedded as a passage).
    OtherPrefix,
    /// The other pooling: the first token's state instead of the mean over the mask
    /// (or the mean for a model that takes the first token).
    OtherPooling,
    /// The mean over the mask, not normalised to unit length.
    NotNormalized,
    /// Tokens without `<s>` / `</s>` (`[CLS]` / `[SEP]`).
    NoSpecialTokens,
    /// The text lowercased before tokenization (a tokenizer that normalises differently).
    Lowercased,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Correct => "correct",
            Variant::NoPrefix => "no_prefix",
            Variant::OtherPrefix => "other_prefix",
            Variant::OtherPooling => "other_pooling",
            Variant::NotNormalized => "not_normalized",
            Variant::NoSpecialTokens => "no_special_tokens",
            Variant::Lowercased => "lowercased",
        }
    }
}

/// Reads the texts (JSON) on stdin; for each variant named in the comma-separated third
/// argument, embeds every text alone; writes one list of vectors per variant.
const SCRIPT: &str = r#"
import json, sys
import numpy as np, onnxruntime as ort
from tokenizers import Tokenizer
d, kind, variants = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
meta = json.load(open(d + "/klaw-model.json"))
tok = Tokenizer.from_file(d + "/tokenizer.json")
tok.no_padding()
tok.enable_truncation(meta["max_tokens"])
opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
sess = ort.InferenceSession(d + "/model.onnx", opts, providers=["CPUExecutionProvider"])
names = [i.name for i in sess.get_inputs()]
outputs = [o.name for o in sess.get_outputs()]
hidden = "last_hidden_state" if "last_hidden_state" in outputs else meta["output"]
own, other = ("query_prefix", "passage_prefix") if kind == "query" else ("passage_prefix", "query_prefix")

def embed(text, variant):
    prefix = {"no_prefix": "", "other_prefix": meta[other]}.get(variant, meta[own])
    pooling = meta.get("pooling", "mean")
    if variant == "other_pooling":
        pooling = "mean" if pooling == "cls" else "cls"
    text = prefix + text
    if variant == "lowercased":
        text = text.lower()
    enc = tok.encode(text, add_special_tokens=(variant != "no_special_tokens"))
    ids = np.array([enc.ids], dtype=np.int64)
    mask = np.ones_like(ids)
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in names:
        feed["token_type_ids"] = np.zeros_like(ids)
    h = sess.run([hidden], feed)[0].astype(np.float64)
    if h.ndim == 2:
        v = h[0]
    elif pooling == "cls":
        v = h[0][0]
    else:
        v = (h[0] * mask[0][:, None]).sum(0) / mask.sum()
    if meta["normalize"] and variant != "not_normalized":
        v = v / np.linalg.norm(v)
    return [float(x) for x in v]

texts = json.load(sys.stdin)
json.dump([[embed(t, v) for t in texts] for v in variants], sys.stdout)
"#;

/// The cache `make setup` fills (`$KLAW_CACHE`, default `~/.cache/klaw`).
pub(crate) fn cache() -> PathBuf {
    EmbedderConfig::cache_dir().unwrap_or_else(|e| panic!("{e}"))
}

/// The reference embeddings of `texts` as `kind` for the model in
/// `<cache>/models/<model>`, one text at a time, with one step done as `variant` says.
pub(crate) fn reference(
    model: &str,
    kind: TextKind,
    variant: Variant,
    texts: &[&str],
) -> Vec<Vec<f32>> {
    references(model, kind, &[variant], texts).remove(0)
}

/// [`reference`] for several variants at once (one Python process, the model loaded
/// once): one list of vectors per variant, in order.
pub(crate) fn references(
    model: &str,
    kind: TextKind,
    variants: &[Variant],
    texts: &[&str],
) -> Vec<Vec<Vec<f32>>> {
    let python = cache().join("venv").join("bin").join("python");
    let kind = match kind {
        TextKind::Query => "query",
        TextKind::Passage => "passage",
    };
    let names: Vec<&str> = variants.iter().map(|v| v.name()).collect();
    let mut child = Command::new(&python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(cache().join("models").join(model))
        .arg(kind)
        .arg(names.join(","))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}; run `make setup`", python.display()));
    let input = serde_json::to_vec(texts).unwrap_or_else(|e| panic!("{e}"));
    child
        .stdin
        .take()
        .map(|mut s| s.write_all(&input))
        .transpose()
        .unwrap_or_else(|e| panic!("writing to the Python reference: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("the Python reference: {e}"));
    assert!(out.status.success(), "the Python reference failed");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("the Python reference: {e}"))
}

/// For each pair of vectors, the largest difference between them, component by component.
pub(crate) fn max_diffs(got: &[Vec<f32>], want: &[Vec<f32>]) -> Vec<f32> {
    assert_eq!(got.len(), want.len(), "counts differ");
    got.iter()
        .zip(want)
        .map(|(a, b)| {
            assert_eq!(a.len(), b.len(), "dimensions differ");
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max)
        })
        .collect()
}
