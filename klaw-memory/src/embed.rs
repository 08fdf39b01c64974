//! Sentence embeddings: an ONNX sentence-embedding model run by ONNX Runtime (`ort`, the
//! library loaded at run time) with a Hugging Face `tokenizers` tokenizer.
//!
//! The files come from `make setup` (`scripts/setup-models.sh`, see `doc/memory.md`):
//! `${KLAW_CACHE:-~/.cache/klaw}/models/<name>/{model.onnx,tokenizer.json,klaw-model.json}`
//! and `${KLAW_CACHE:-~/.cache/klaw}/onnxruntime/libonnxruntime.so.1.31.1`.
//!
//! ```no_run
//! use klaw_memory::{Embedder, EmbedderConfig};
//!
//! # fn main() -> Result<(), klaw_memory::EmbedError> {
//! let embedder = Embedder::new(EmbedderConfig::from_cache()?);
//! let q = embedder.embed_queries(&["столица России"])?;
//! let p = embedder.embed_passages(&["Moscow is the capital of Russia."])?;
//! let cosine: f32 = q[0].iter().zip(&p[0]).map(|(a, b)| a * b).sum();
//! # let _ = cosine;
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ort::environment::Environment;
use ort::session::Session;
use ort::value::Tensor;
use serde::Deserialize;
use tokenizers::Tokenizer;

/// The ONNX Runtime library `make setup` installs; `ort` 2.0.0-rc.15 (`api-31`) matches it.
pub(super) const RUNTIME_LIBRARY: &str = "libonnxruntime.so.1.31.1";
/// The model `make setup` installs.
pub(super) const DEFAULT_MODEL: &str = "use-multilingual-v3";
/// The model's description, beside `model.onnx` and `tokenizer.json`.
pub(super) const MODEL_CONFIG: &str = "klaw-model.json";

/// The `pooling` values [`EmbedderConfig::load`] accepts.
const POOLINGS: [&str; 2] = ["mean", "cls"];

const SETUP_HINT: &str = "run `make setup` (scripts/setup-models.sh) to install it";

/// Why embedding failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The ONNX Runtime library file is not there.
    #[error("ONNX Runtime library not found at {}; {SETUP_HINT}", path.display())]
    RuntimeMissing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The library is there but could not be loaded (wrong version, broken file).
    #[error("could not load ONNX Runtime from {}: {message}; {SETUP_HINT} again", path.display())]
    RuntimeLoad {
        /// The library.
        path: PathBuf,
        /// What ONNX Runtime or the loader said.
        message: String,
    },
    /// A model file (`model.onnx`, `tokenizer.json`, `klaw-model.json`) or the model
    /// directory is not there.
    #[error("embedding model file not found: {}; {SETUP_HINT}", path.display())]
    ModelMissing {
        /// The missing file or directory.
        path: PathBuf,
    },
    /// A model file is there but unusable.
    #[error("invalid embedding model file {}: {message}", path.display())]
    ModelInvalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The home directory is unknown and `KLAW_CACHE` is not set.
    #[error("cannot find the Klaw cache: neither KLAW_CACHE nor HOME is set")]
    NoCacheDir,
    /// Running the model failed.
    #[error("embedding failed: {0}")]
    Inference(String),
}

impl EmbedError {
    /// Whether `make setup` fixes it: a file is missing or unloadable.
    pub fn needs_setup(&self) -> bool {
        matches!(
            self,
            Self::RuntimeMissing { .. } | Self::RuntimeLoad { .. } | Self::ModelMissing { .. }
        )
    }
}

/// Whether a text is a search query or a text that is stored and searched; e5-style models
/// want a different prefix for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// A search query (`query: `).
    Query,
    /// A stored text (`passage: `).
    Passage,
}

/// How token ids reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputFormat {
    /// `input_ids` and `attention_mask` (and `token_type_ids` if the model has it), int64
    /// `[batch, seq]`, each text padded to the longest of its batch (BERT-style exports).
    #[default]
    Padded,
    /// `token_ids` int32 `[n_tokens]` (every text's ids one after the other) and
    /// `row_splits` int64 `[batch + 1]` (where each text starts, then the total): no
    /// padding (the Universal Sentence Encoder's graph after its tokenizer).
    Ragged,
}

/// How to find and run an embedding model; [`EmbedderConfig::load`] reads it from the
/// model's `klaw-model.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedderConfig {
    /// The directory with `model.onnx`, `tokenizer.json` and `klaw-model.json`.
    pub model_dir: PathBuf,
    /// The ONNX Runtime shared library.
    pub runtime_library: PathBuf,
    /// The model's name.
    pub name: String,
    /// Vector length.
    pub dims: usize,
    /// Longer texts are truncated to this many tokens (special tokens included).
    pub max_tokens: usize,
    /// How a per-token output (`[batch, seq, dims]`) becomes one vector: `"mean"` over
    /// the tokens the attention mask keeps, or `"cls"` (the first token). A pooled output
    /// (`[batch, dims]`) is taken as the model gives it.
    pub pooling: String,
    /// L2-normalise the vectors (a dot product is then the cosine).
    pub normalize: bool,
    /// Put before a query.
    pub query_prefix: String,
    /// Put before a stored text.
    pub passage_prefix: String,
    /// The output read: `[batch, dims]` (pooled) or `[batch, seq, dims]` (pooled here).
    pub output: String,
    /// How token ids are fed.
    pub input: InputFormat,
    /// Identifies model + tokenizer; vectors from different fingerprints do not mix.
    pub fingerprint: String,
    /// ONNX Runtime intra-op threads (0: ONNX Runtime's choice). Spinning is off.
    pub threads: usize,
    /// Texts per model run; texts are sorted by length so padding stays small.
    pub batch_size: usize,
    /// Hybrid search's lift for this model's cosines: the most a chunk's text evidence
    /// adds to its cosine (`None`: 0.5, tuned on the default model; see `doc/memory.md`).
    /// A model whose cosines lie close together (e5's: unrelated texts about 0.7) needs a
    /// smaller one than a model whose cosines spread out (the Universal Sentence
    /// Encoder's: unrelated texts about 0.1), or the words outweigh the meaning.
    pub hybrid_lift: Option<f64>,
}

/// The largest `hybrid_lift` [`EmbedderConfig::load`] accepts: more than twice a
/// cosine's whole range would let words alone decide.
const MAX_HYBRID_LIFT: f64 = 4.0;

#[derive(Deserialize)]
struct ModelFile {
    name: String,
    dims: usize,
    #[serde(default = "default_max_tokens")]
    max_tokens: usize,
    #[serde(default = "default_pooling")]
    pooling: String,
    #[serde(default = "default_true")]
    normalize: bool,
    #[serde(default)]
    query_prefix: String,
    #[serde(default)]
    passage_prefix: String,
    #[serde(default = "default_output")]
    output: String,
    #[serde(default)]
    input: InputFormat,
    fingerprint: String,
    #[serde(default)]
    hybrid_lift: Option<f64>,
}

fn default_max_tokens() -> usize {
    512
}
fn default_pooling() -> String {
    "mean".into()
}
fn default_true() -> bool {
    true
}
fn default_output() -> String {
    "sentence_embedding".into()
}

impl EmbedderConfig {
    /// The Klaw cache ([`klaw_core::cache_dir`]: `$KLAW_CACHE`, else `~/.cache/klaw`).
    pub fn cache_dir() -> Result<PathBuf, EmbedError> {
        klaw_core::cache_dir().ok_or(EmbedError::NoCacheDir)
    }

    /// The default model directory and runtime library under [`cache_dir`](Self::cache_dir).
    pub fn default_paths() -> Result<(PathBuf, PathBuf), EmbedError> {
        let cache = Self::cache_dir()?;
        Ok((
            cache.join("models").join(DEFAULT_MODEL),
            cache.join("onnxruntime").join(RUNTIME_LIBRARY),
        ))
    }

    /// The default model with the default runtime library, from the cache.
    pub fn from_cache() -> Result<Self, EmbedError> {
        let (model_dir, lib) = Self::default_paths()?;
        Self::load(model_dir, lib)
    }

    /// The model `name` (a directory under `<cache>/models/`) with the default runtime
    /// library.
    pub fn from_cache_model(name: &str) -> Result<Self, EmbedError> {
        let (default_dir, lib) = Self::default_paths()?;
        Self::load(default_dir.with_file_name(name), lib)
    }

    /// Reads `model_dir/klaw-model.json`; checks that the model, tokenizer and library
    /// files exist (they are loaded later, on first use).
    pub fn load(
        model_dir: impl Into<PathBuf>,
        runtime_library: impl Into<PathBuf>,
    ) -> Result<Self, EmbedError> {
        let model_dir = model_dir.into();
        let runtime_library = runtime_library.into();
        if !model_dir.is_dir() {
            return Err(EmbedError::ModelMissing { path: model_dir });
        }
        let json_path = model_dir.join(MODEL_CONFIG);
        let text = std::fs::read_to_string(&json_path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                EmbedError::ModelMissing {
                    path: json_path.clone(),
                }
            } else {
                EmbedError::ModelInvalid {
                    path: json_path.clone(),
                    message: e.to_string(),
                }
            }
        })?;
        let f: ModelFile = serde_json::from_str(&text).map_err(|e| EmbedError::ModelInvalid {
            path: json_path.clone(),
            message: e.to_string(),
        })?;
        if !POOLINGS.contains(&f.pooling.as_str()) {
            return Err(EmbedError::ModelInvalid {
                path: json_path,
                message: format!(
                    "pooling `{}` is not supported (use `mean` or `cls`)",
                    f.pooling
                ),
            });
        }
        if f.dims == 0 {
            return Err(EmbedError::ModelInvalid {
                path: json_path,
                message: "dims must be at least 1".to_owned(),
            });
        }
        if let Some(lift) = f.hybrid_lift
            && !(0.0..=MAX_HYBRID_LIFT).contains(&lift)
        {
            return Err(EmbedError::ModelInvalid {
                path: json_path,
                message: format!("hybrid_lift {lift} is not between 0 and {MAX_HYBRID_LIFT}"),
            });
        }
        for file in ["model.onnx", "tokenizer.json"] {
            let p = model_dir.join(file);
            if !p.is_file() {
                return Err(EmbedError::ModelMissing { path: p });
            }
        }
        if !runtime_library.is_file() {
            return Err(EmbedError::RuntimeMissing {
                path: runtime_library,
            });
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Self {
            model_dir,
            runtime_library,
            name: f.name,
            dims: f.dims,
            max_tokens: f.max_tokens.max(2),
            pooling: f.pooling,
            normalize: f.normalize,
            query_prefix: f.query_prefix,
            passage_prefix: f.passage_prefix,
            output: f.output,
            input: f.input,
            fingerprint: f.fingerprint,
            threads,
            batch_size: 32,
            hybrid_lift: f.hybrid_lift,
        })
    }

    /// The runtime library's version, read from its file name (`libonnxruntime.so.1.31.1`,
    /// symlinks followed), if the name carries one.
    pub fn runtime_version(&self) -> Option<String> {
        let real = std::fs::canonicalize(&self.runtime_library).ok()?;
        let name = real.file_name()?.to_str()?;
        let v = name.split_once(".so.")?.1;
        (!v.is_empty()).then(|| v.to_owned())
    }

    /// Loads the runtime library (once per process; no session is made) and checks that
    /// its API version suits `ort`; returns the version named by its file, or `"unknown"`.
    pub fn probe_runtime(&self) -> Result<String, EmbedError> {
        let path = &self.runtime_library;
        if !path.is_file() {
            return Err(EmbedError::RuntimeMissing { path: path.clone() });
        }
        ort::init_from(path).map_err(|e| EmbedError::RuntimeLoad {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(self.runtime_version().unwrap_or_else(|| "unknown".into()))
    }
}

/// The ONNX Runtime environment: one per process, made on first use.
static RUNTIME: Mutex<Option<Environment>> = Mutex::new(None);

fn runtime(lib: &Path) -> Result<Environment, EmbedError> {
    let mut guard = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(env) = guard.as_ref() {
        return Ok(env.clone());
    }
    if !lib.is_file() {
        return Err(EmbedError::RuntimeMissing {
            path: lib.to_path_buf(),
        });
    }
    let load = |message: String| EmbedError::RuntimeLoad {
        path: lib.to_path_buf(),
        message,
    };
    let env = ort::init_from(lib)
        .map_err(|e| load(e.to_string()))?
        .with_name("klaw")
        .with_telemetry(false)
        .build()
        .map_err(|e| load(e.to_string()))?;
    *guard = Some(env.clone());
    Ok(env)
}

struct Loaded {
    tokenizer: Tokenizer,
    session: Mutex<Session>,
    pad_id: i64,
    /// The model declares a `token_type_ids` input (BERT exports often do): it gets zeros.
    token_type_ids: bool,
}

struct Inner {
    config: EmbedderConfig,
    loaded: OnceLock<Loaded>,
    loading: Mutex<()>,
}

/// Embeds texts with the model of an [`EmbedderConfig`]. Cheap to clone (shared); the
/// model is loaded on first use, once. Calls block: from async code use
/// [`embed_async`](Self::embed_async) or `spawn_blocking`.
#[derive(Clone)]
pub struct Embedder {
    inner: Arc<Inner>,
}

impl fmt::Debug for Embedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Embedder")
            .field("model", &self.inner.config.name)
            .field("loaded", &self.inner.loaded.get().is_some())
            .finish()
    }
}

impl Embedder {
    /// An embedder for `config`; nothing is loaded yet.
    pub fn new(config: EmbedderConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                loaded: OnceLock::new(),
                loading: Mutex::new(()),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EmbedderConfig {
        &self.inner.config
    }

    /// The model's fingerprint (from `klaw-model.json`).
    pub fn fingerprint(&self) -> &str {
        &self.inner.config.fingerprint
    }

    /// Vector length.
    pub fn dims(&self) -> usize {
        self.inner.config.dims
    }

    /// Loads the runtime, tokenizer and model now instead of on first use.
    pub fn load(&self) -> Result<(), EmbedError> {
        self.loaded().map(|_| ())
    }

    fn loaded(&self) -> Result<&Loaded, EmbedError> {
        if let Some(l) = self.inner.loaded.get() {
            return Ok(l);
        }
        let _guard = self.inner.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = self.inner.loaded.get() {
            return Ok(l);
        }
        let loaded = load(&self.inner.config)?;
        Ok(self.inner.loaded.get_or_init(|| loaded))
    }

    /// Embeds search queries (with the query prefix), one vector per text, in order.
    pub fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(TextKind::Query, texts)
    }

    /// Embeds stored texts (with the passage prefix), one vector per text, in order.
    pub fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(TextKind::Passage, texts)
    }

    /// Embeds `texts` as `kind`, one vector per text, in the caller's order. Texts longer
    /// than `max_tokens` are truncated.
    pub fn embed(&self, kind: TextKind, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let loaded = self.loaded()?;
        let cfg = &self.inner.config;
        let prefix = match kind {
            TextKind::Query => &cfg.query_prefix,
            TextKind::Passage => &cfg.passage_prefix,
        };
        let mut encoded = Vec::with_capacity(texts.len());
        for t in texts {
            let input = format!("{prefix}{t}");
            let enc = loaded
                .tokenizer
                .encode(input.as_str(), true)
                .map_err(|e| EmbedError::Inference(format!("tokenizer: {e}")))?;
            encoded.push(enc.get_ids().iter().map(|&i| i64::from(i)).collect());
        }
        embed_ids(loaded, cfg, &encoded)
    }

    /// [`embed`](Self::embed) on tokio's blocking pool.
    pub async fn embed_async(
        &self,
        kind: TextKind,
        texts: Vec<String>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            this.embed(kind, &refs)
        })
        .await
        .map_err(|e| EmbedError::Inference(format!("embedding task failed: {e}")))?
    }

    /// The number of tokens `text` has as `kind` (prefix and special tokens included,
    /// before truncation is applied: at most `max_tokens`).
    pub fn count_tokens(&self, kind: TextKind, text: &str) -> Result<usize, EmbedError> {
        let loaded = self.loaded()?;
        let cfg = &self.inner.config;
        let prefix = match kind {
            TextKind::Query => &cfg.query_prefix,
            TextKind::Passage => &cfg.passage_prefix,
        };
        let input = format!("{prefix}{text}");
        loaded
            .tokenizer
            .encode(input.as_str(), true)
            .map(|e| e.get_ids().len())
            .map_err(|e| EmbedError::Inference(format!("tokenizer: {e}")))
    }
}

fn load(cfg: &EmbedderConfig) -> Result<Loaded, EmbedError> {
    let tok_path = cfg.model_dir.join("tokenizer.json");
    let model_path = cfg.model_dir.join("model.onnx");
    for p in [&tok_path, &model_path] {
        if !p.is_file() {
            return Err(EmbedError::ModelMissing { path: p.clone() });
        }
    }
    let invalid = |path: &Path, message: String| EmbedError::ModelInvalid {
        path: path.to_path_buf(),
        message,
    };
    let mut tokenizer =
        Tokenizer::from_file(&tok_path).map_err(|e| invalid(&tok_path, e.to_string()))?;
    let pad_id = tokenizer
        .get_padding()
        .map(|p| p.pad_id)
        .or_else(|| tokenizer.token_to_id("<pad>"))
        .unwrap_or(0);
    // Whatever padding and truncation the file has baked in (all-MiniLM-L6-v2's pads and
    // truncates to 128) is replaced: no padding (batches pad to their longest text), and
    // truncation at `max_tokens` with the special tokens kept ([CLS] ... [SEP]).
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams {
            max_length: cfg.max_tokens,
            ..Default::default()
        }))
        .map_err(|e| invalid(&tok_path, e.to_string()))?;

    let env = runtime(&cfg.runtime_library)?;
    let ort_err = |e: String| invalid(&model_path, e);
    let mut builder = Session::builder(&env)
        .map_err(|e| ort_err(e.to_string()))?
        .with_intra_op_spinning(false)
        .map_err(|e| ort_err(e.to_string()))?
        .with_inter_op_spinning(false)
        .map_err(|e| ort_err(e.to_string()))?
        .with_inter_threads(1)
        .map_err(|e| ort_err(e.to_string()))?;
    if cfg.threads > 0 {
        builder = builder
            .with_intra_threads(cfg.threads)
            .map_err(|e| ort_err(e.to_string()))?;
    }
    let session = builder
        .commit_from_file(&model_path)
        .map_err(|e| ort_err(e.to_string()))?;
    if !session.outputs().iter().any(|o| o.name() == cfg.output) {
        return Err(ort_err(format!("the model has no output `{}`", cfg.output)));
    }
    let inputs: Vec<&str> = session.inputs().iter().map(|i| i.name()).collect();
    let fed: &[&str] = match cfg.input {
        InputFormat::Padded => &["input_ids", "attention_mask", "token_type_ids"],
        InputFormat::Ragged => &["token_ids", "row_splits"],
    };
    if let Some(other) = inputs.iter().find(|n| !fed.contains(n)) {
        return Err(ort_err(format!(
            "the model wants an input `{other}`; with input `{:?}` only {} are fed",
            cfg.input,
            fed.join(", ")
        )));
    }
    let token_type_ids = inputs.contains(&"token_type_ids");
    Ok(Loaded {
        tokenizer,
        session: Mutex::new(session),
        pad_id: i64::from(pad_id),
        token_type_ids,
    })
}

/// Runs the model over token id lists: sorted by length, batched, padded within a batch;
/// results returned in the input order.
fn embed_ids(
    loaded: &Loaded,
    cfg: &EmbedderConfig,
    ids: &[Vec<i64>],
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| ids[i].len());
    let mut out: Vec<Vec<f32>> = vec![Vec::new(); ids.len()];
    let batch_size = cfg.batch_size.max(1);
    for chunk in order.chunks(batch_size) {
        let seq = chunk
            .iter()
            .map(|&i| ids[i].len())
            .max()
            .unwrap_or(0)
            .max(1);
        let b = chunk.len();
        if cfg.input == InputFormat::Ragged {
            let vectors = run_ragged(loaded, cfg, chunk.iter().map(|&i| ids[i].as_slice()))?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
            continue;
        }
        let mut input_ids = vec![loaded.pad_id; b * seq];
        let mut mask = vec![0i64; b * seq];
        for (row, &i) in chunk.iter().enumerate() {
            let t = &ids[i];
            input_ids[row * seq..row * seq + t.len()].copy_from_slice(t);
            mask[row * seq..row * seq + t.len()].fill(1);
        }
        let vectors = run(loaded, cfg, b, seq, input_ids, &mask)?;
        for (&i, v) in chunk.iter().zip(vectors) {
            out[i] = v;
        }
    }
    Ok(out)
}

/// Named inputs for one model run.
type Inputs = Vec<(
    std::borrow::Cow<'static, str>,
    ort::session::SessionInputValue<'static>,
)>;

fn run(
    loaded: &Loaded,
    cfg: &EmbedderConfig,
    b: usize,
    seq: usize,
    input_ids: Vec<i64>,
    mask: &[i64],
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let fail = |e: String| EmbedError::Inference(e);
    let ids_t = Tensor::from_array(([b, seq], input_ids)).map_err(|e| fail(e.to_string()))?;
    let mask_t = Tensor::from_array(([b, seq], mask.to_vec())).map_err(|e| fail(e.to_string()))?;
    let mut inputs: Inputs = ort::inputs!["input_ids" => ids_t, "attention_mask" => mask_t];
    if loaded.token_type_ids {
        let types_t =
            Tensor::from_array(([b, seq], vec![0i64; b * seq])).map_err(|e| fail(e.to_string()))?;
        inputs.push(("token_type_ids".into(), types_t.into()));
    }
    infer(loaded, cfg, inputs, b, Some((seq, mask)))
}

/// Runs a model with [`InputFormat::Ragged`] inputs over one batch of texts' ids (each
/// at least one token: the tokenizer adds `<s>` and `</s>`); its output is pooled.
fn run_ragged<'a>(
    loaded: &Loaded,
    cfg: &EmbedderConfig,
    texts: impl Iterator<Item = &'a [i64]>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let fail = |e: String| EmbedError::Inference(e);
    let mut token_ids: Vec<i32> = Vec::new();
    let mut splits: Vec<i64> = vec![0];
    for t in texts {
        if t.is_empty() {
            // ONNX Runtime would fail on an empty row with a less clear message
            return Err(fail(
                "a text has no tokens: the model's tokenizer must add its start and end tokens"
                    .into(),
            ));
        }
        for &id in t {
            token_ids.push(i32::try_from(id).map_err(|_| {
                fail(format!(
                    "token id {id} does not fit the model's int32 token_ids"
                ))
            })?);
        }
        splits.push(token_ids.len() as i64);
    }
    let b = splits.len() - 1;
    let n = token_ids.len();
    let ids_t = Tensor::from_array(([n], token_ids)).map_err(|e| fail(e.to_string()))?;
    let splits_t = Tensor::from_array(([b + 1], splits)).map_err(|e| fail(e.to_string()))?;
    infer(
        loaded,
        cfg,
        ort::inputs!["token_ids" => ids_t, "row_splits" => splits_t],
        b,
        None,
    )
}

/// Runs the model on `inputs` for `b` texts and reads one vector per text from its
/// output: `[b, dims]` as it is, or, with `tokens` (the padded length and the mask),
/// `[b, seq, dims]` pooled here; L2-normalised if configured.
fn infer(
    loaded: &Loaded,
    cfg: &EmbedderConfig,
    inputs: Inputs,
    b: usize,
    tokens: Option<(usize, &[i64])>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let fail = |e: String| EmbedError::Inference(e);
    let mut session = loaded.session.lock().unwrap_or_else(|e| e.into_inner());
    let outputs = session.run(inputs).map_err(|e| fail(e.to_string()))?;
    let value = outputs
        .get(&cfg.output)
        .ok_or_else(|| fail(format!("the model returned no `{}`", cfg.output)))?;
    let (shape, data) = value
        .try_extract_tensor::<f32>()
        .map_err(|e| fail(e.to_string()))?;
    let dims = cfg.dims;
    let mut vectors = match (&**shape, tokens) {
        ([rb, d], _) if *rb as usize == b && *d as usize == dims => data
            .chunks_exact(dims)
            .map(<[f32]>::to_vec)
            .collect::<Vec<_>>(),
        ([rb, rs, d], Some((seq, mask)))
            if *rb as usize == b && *rs as usize == seq && *d as usize == dims =>
        {
            if cfg.pooling == "cls" {
                cls_pool(data, b, seq, dims)
            } else {
                mean_pool(data, mask, b, seq, dims)
            }
        }
        (other, tokens) => {
            let per_token = tokens.map_or(String::new(), |(seq, _)| {
                format!(" or [{b}, {seq}, {dims}]")
            });
            return Err(fail(format!(
                "output `{}` has shape {other:?}, expected [{b}, {dims}]{per_token}",
                cfg.output
            )));
        }
    };
    if cfg.normalize {
        vectors.iter_mut().for_each(|v| l2_normalize(v));
    }
    Ok(vectors)
}

/// Mean over the tokens whose mask is 1, for `[b, seq, dims]` hidden states.
fn mean_pool(data: &[f32], mask: &[i64], b: usize, seq: usize, dims: usize) -> Vec<Vec<f32>> {
    (0..b)
        .map(|row| {
            let mut acc = vec![0f32; dims];
            let mut n = 0f32;
            for s in 0..seq {
                if mask[row * seq + s] == 0 {
                    continue;
                }
                n += 1.0;
                let tok = &data[(row * seq + s) * dims..(row * seq + s + 1) * dims];
                for (a, x) in acc.iter_mut().zip(tok) {
                    *a += x;
                }
            }
            if n > 0.0 {
                acc.iter_mut().for_each(|a| *a /= n);
            }
            acc
        })
        .collect()
}

/// The first token's state (`[CLS]` / `<s>`; padding is on the right), for
/// `[b, seq, dims]` hidden states.
fn cls_pool(data: &[f32], b: usize, seq: usize, dims: usize) -> Vec<Vec<f32>> {
    (0..b)
        .map(|row| data[row * seq * dims..(row * seq + 1) * dims].to_vec())
        .collect()
}

fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_pool_skips_padding() {
        // two tokens of dims 2, the second padded
        let data = [1.0, 3.0, 100.0, 100.0];
        let out = mean_pool(&data, &[1, 0], 1, 2, 2);
        assert_eq!(out, vec![vec![1.0, 3.0]]);
    }

    #[test]
    fn cls_pool_takes_the_first_token_of_each_row() {
        // two rows of two tokens of dims 2
        let data = [1.0, 2.0, 9.0, 9.0, 3.0, 4.0, 9.0, 9.0];
        assert_eq!(
            cls_pool(&data, 2, 2, 2),
            vec![vec![1.0, 2.0], vec![3.0, 4.0]]
        );
    }

    #[test]
    fn unknown_pooling_is_refused_with_the_choices() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(MODEL_CONFIG),
            r#"{"name": "m", "dims": 4, "pooling": "max", "fingerprint": "f"}"#,
        )
        .unwrap();
        let err = EmbedderConfig::load(dir.path(), dir.path().join("lib.so")).unwrap_err();
        assert!(matches!(err, EmbedError::ModelInvalid { .. }), "{err}");
        assert!(err.to_string().contains("use `mean` or `cls`"), "{err}");
    }

    #[test]
    fn l2_normalize_gives_unit_length_and_keeps_zero() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0, 0.0];
        l2_normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }

    #[test]
    fn zero_dims_is_an_invalid_model_not_a_later_panic() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(MODEL_CONFIG),
            r#"{"name": "m", "dims": 0, "fingerprint": "f"}"#,
        )
        .unwrap();
        let err = EmbedderConfig::load(dir.path(), dir.path().join("lib.so")).unwrap_err();
        assert!(matches!(err, EmbedError::ModelInvalid { .. }), "{err}");
        assert!(err.to_string().contains("dims must be at least 1"), "{err}");
    }

    #[test]
    fn hybrid_lift_is_read_and_a_wild_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["model.onnx", "tokenizer.json", "lib.so"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        let load = |json: &str| {
            std::fs::write(dir.path().join(MODEL_CONFIG), json).unwrap();
            EmbedderConfig::load(dir.path(), dir.path().join("lib.so"))
        };
        let base = r#""name": "m", "dims": 4, "fingerprint": "f""#;
        assert_eq!(load(&format!("{{{base}}}")).unwrap().hybrid_lift, None);
        let c = load(&format!(r#"{{{base}, "hybrid_lift": 0.15}}"#)).unwrap();
        assert_eq!(c.hybrid_lift, Some(0.15));
        for wild in ["-0.1", "100"] {
            let err = load(&format!(r#"{{{base}, "hybrid_lift": {wild}}}"#)).unwrap_err();
            assert!(matches!(err, EmbedError::ModelInvalid { .. }), "{err}");
            assert!(err.to_string().contains("hybrid_lift"), "{err}");
        }
    }

    #[test]
    fn missing_model_dir_names_the_path_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-model");
        let err = EmbedderConfig::load(&missing, dir.path().join("lib.so")).unwrap_err();
        assert!(err.needs_setup());
        let msg = err.to_string();
        assert!(msg.contains(&missing.display().to_string()), "{msg}");
        assert!(msg.contains("make setup"), "{msg}");
    }
}
