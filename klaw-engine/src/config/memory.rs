//! The `memory` section of `engine.json` (and its `weights`): the embedding model, its
//! runtime, chunking and the weights of hybrid search; [`Config::memory`] gives the
//! memory tools their `MemoryConfig`.

use std::path::PathBuf;

use super::Config;
use super::keys::{FromEnv, at_least, at_least_if_set, section};

/// The model `make setup` installs and memory uses unless `memory.model` says otherwise.
pub const DEFAULT_MEMORY_MODEL: &str = "use-multilingual-v3";
/// The ONNX Runtime library `make setup` installs, under `<cache>/onnxruntime/`.
pub const DEFAULT_RUNTIME_LIBRARY: &str = "libonnxruntime.so.1.31.1";

section! {
    /// The `memory` section of `engine.json`. Every key is optional. (The defaults of
    /// chunking and weights are memory's own; a test checks that they agree.)
    pub struct MemorySection {
        keys {
            /// A name is a directory under `<cache>/models/`: `use-multilingual-v3` (the
            /// default: the Universal Sentence Encoder, 16 languages, best across Russian and
            /// English), `multilingual-e5-small` (~100 languages) or `all-minilm-l6-v2`
            /// (light, English only). Changing it re-embeds the indexes on open. A value
            /// with a `/`, or starting with `~` or `.`, is the path of a model directory
            /// (`model.onnx`, `tokenizer.json`, `klaw-model.json`). A list of several
            /// (`["use-multilingual-v3", "multilingual-e5-small"]`; in the variable,
            /// separated by commas) embeds every text with each, one vector space per
            /// model, and search adds them up, the first leading: better recall for
            /// every text embedded twice (see doc/memory.md, "Two models").
            model: MemoryModels = DEFAULT_MEMORY_MODEL.into();
                key "model", env "KLAW_MEMORY_MODEL",
                type "string: a model name or a directory path; or an array of them", check model_named;
            /// The ONNX Runtime shared library (version 1.31; `ort` 2.0.0-rc.15 is built
            /// for it).
            runtime_library: Option<PathBuf> = None;
                key "runtimeLibrary", env "KLAW_MEMORY_RUNTIME_LIBRARY",
                type "string (path) or `null`",
                shown "`<cache>/onnxruntime/libonnxruntime.so.1.31.1`";
            /// ONNX Runtime intra-op threads for the model (inter-op: 1; threads do not
            /// spin while idle).
            threads: Option<usize> = None;
                key "threads", env "KLAW_MEMORY_THREADS", type "integer ≥ 1, or `null`",
                shown "one per core", check at_least_if_set(1);
            /// Token budget of a chunk when saved text is cut up (tokens estimated as
            /// characters / 4).
            chunk_tokens: usize = 256;
                key "chunkTokens", env "KLAW_MEMORY_CHUNK_TOKENS", type "integer ≥ 8",
                check at_least(8);
            /// Tokens a chunk repeats from the end of the previous paragraph.
            chunk_overlap: usize = 32;
                key "chunkOverlap", env "KLAW_MEMORY_CHUNK_OVERLAP",
                type "integer, 0 to less than `chunkTokens / 2`", check overlap_below_half;
            /// With `storage.url` (memory on PostgreSQL with pgvector): the HNSW index's
            /// `ef_search`, the candidates it walks per vector search (raised to the
            /// number asked for when that is larger). Higher finds more of the exact
            /// nearest, slower (see doc/memory.md, "PostgreSQL"). Unused on SQLite.
            ef_search: u32 = 200;
                key "efSearch", env "KLAW_MEMORY_EF_SEARCH", type "integer, 1 to 1000",
                check ef_search_range;
        }
        sections {
            /// Hybrid search: how much each side counts in the fusion.
            weights: MemoryWeights; key "weights";
        }
    }
}

/// `memory.model`: one model (a name or a directory path), or several, the first
/// leading. Read from a string or an array of strings; written as a string when there is
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryModels(Vec<String>);

impl MemoryModels {
    /// The models, as written, the first leading.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// The first (leading) model.
    pub fn first(&self) -> &str {
        self.0.first().map_or(DEFAULT_MEMORY_MODEL, String::as_str)
    }
}

impl From<&str> for MemoryModels {
    fn from(name: &str) -> Self {
        Self(vec![name.to_owned()])
    }
}

impl From<Vec<String>> for MemoryModels {
    fn from(names: Vec<String>) -> Self {
        Self(names)
    }
}

impl serde::Serialize for MemoryModels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => s.serialize_str(one),
            many => many.serialize(s),
        }
    }
}

impl<'de> serde::Deserialize<'de> for MemoryModels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged, expecting = "a model name or path, or an array of them")]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        Ok(match OneOrMany::deserialize(d)? {
            OneOrMany::One(m) => Self(vec![m]),
            OneOrMany::Many(ms) => Self(ms),
        })
    }
}

impl FromEnv for MemoryModels {
    const EXPECTED: &'static str = "a model name or path, or several separated by commas";
    fn from_env(value: &str) -> Result<Self, String> {
        // kept as written: `memory.model`'s check refuses an empty one
        Ok(Self::from(
            value
                .split(',')
                .map(|v| v.trim().to_owned())
                .collect::<Vec<_>>(),
        ))
    }
}

section! {
    /// `memory.weights`: how much each side of a hybrid search counts.
    pub struct MemoryWeights {
        keys {
            /// Weight of the full-text side in a hybrid search: its word evidence (at most
            /// the model's lift: 0.5, e5's 0.1, `hybrid_lift` in its `klaw-model.json`) is
            /// added to the cosine times this.
            text: f64 = 1.0;
                key "text", env "KLAW_MEMORY_TEXT_WEIGHT", type "number > 0",
                check positive_weight;
            /// Weight of the vector side in a hybrid search: the cosine is multiplied by it.
            vector: f64 = 1.0;
                key "vector", env "KLAW_MEMORY_VECTOR_WEIGHT", type "number > 0",
                check positive_weight;
        }
    }
}

impl Copy for MemoryWeights {}

/// `memory.model`: at least one model, none empty, none twice.
fn model_named(models: &MemoryModels, _: &MemorySection) -> Result<(), String> {
    let names = models.names();
    if names.is_empty() || names.iter().any(|m| m.trim().is_empty()) {
        return Err(
            "must name a model (such as use-multilingual-v3 or multilingual-e5-small) \
                    or a model directory, or a list of them"
                .into(),
        );
    }
    for (i, m) in names.iter().enumerate() {
        if names[..i].iter().any(|x| x.trim() == m.trim()) {
            return Err(format!(
                "lists {m:?} twice: each model is one vector space, list it once"
            ));
        }
    }
    Ok(())
}

/// `memory.chunkOverlap`: less than half of `memory.chunkTokens`.
fn overlap_below_half(overlap: &usize, m: &MemorySection) -> Result<(), String> {
    if *overlap >= m.chunk_tokens / 2 {
        return Err(format!(
            "{overlap} must be less than half of memory.chunkTokens ({})",
            m.chunk_tokens
        ));
    }
    Ok(())
}

/// A weight of hybrid search: finite and above 0.
fn positive_weight(w: &f64, _: &MemoryWeights) -> Result<(), String> {
    if w.is_finite() && *w > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "{w} must be a number greater than 0 (to search one side only, use the search \
             mode `text` or `vector`)"
        ))
    }
}

/// `memory.efSearch`: pgvector accepts 1 to 1000.
fn ef_search_range(v: &u32, _: &MemorySection) -> Result<(), String> {
    if (1..=1000).contains(v) {
        Ok(())
    } else {
        Err(format!(
            "{v} must be between 1 and 1000 (pgvector's hnsw.ef_search)"
        ))
    }
}

impl Config {
    /// What the memory tools run with; the engine registers it as a service.
    #[cfg(feature = "memory")]
    pub fn memory(&self) -> klaw_tools::tools::memory::MemoryConfig {
        use klaw_tools::tools::memory::{ChunkOptions, Weights};
        let m = &self.raw.memory;
        klaw_tools::tools::memory::MemoryConfig {
            model_dir: self.memory_model_dir.clone(),
            more_model_dirs: self.memory_more_model_dirs.clone(),
            runtime_library: self.memory_runtime_library.clone(),
            threads: Some(self.memory_threads),
            weights: Weights {
                text: m.weights.text,
                vector: m.weights.vector,
            },
            chunk: ChunkOptions {
                max_tokens: m.chunk_tokens,
                overlap_tokens: m.chunk_overlap,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{env, resolve_defaults};
    use crate::config::{ConfigSource, parse};
    use std::path::{Path, PathBuf};

    /// Issue 30: `memory.model` as a list (two vector spaces), from the file and from
    /// the variable (comma-separated); one model is written back as a string.
    #[test]
    fn memory_model_may_list_several_models() {
        let file = ConfigSource::File("/etc/klaw/engine.json".into());
        let raw = parse(
            Path::new("/etc/klaw/engine.json"),
            r#"{"memory": {"model": ["use-multilingual-v3", "./models/mine"]}}"#,
        )
        .unwrap();
        let c = Config::resolve(raw.clone(), file.clone(), &env(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/h/.cache/klaw/models/use-multilingual-v3"))
        );
        assert_eq!(
            c.memory_more_model_dirs,
            [PathBuf::from("/etc/klaw/./models/mine")]
        );
        // The memory tools' config (the `memory` feature) gets both.
        #[cfg(feature = "memory")]
        assert_eq!(
            c.memory().more_model_dirs,
            [PathBuf::from("/etc/klaw/./models/mine")]
        );
        assert_eq!(
            c.effective()["memory"]["model"],
            serde_json::json!(["use-multilingual-v3", "./models/mine"])
        );

        let e = env(&[
            ("HOME", "/h"),
            (
                "KLAW_MEMORY_MODEL",
                "multilingual-e5-small, use-multilingual-v3",
            ),
        ]);
        let c = Config::resolve(raw, file.clone(), &e).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/h/.cache/klaw/models/multilingual-e5-small"))
        );
        assert_eq!(
            c.memory_more_model_dirs,
            [PathBuf::from("/h/.cache/klaw/models/use-multilingual-v3")]
        );

        // one model, as a string or a list of one: the same, and no second space
        for json in [
            r#"{"memory": {"model": "multilingual-e5-small"}}"#,
            r#"{"memory": {"model": ["multilingual-e5-small"]}}"#,
        ] {
            let raw = parse(Path::new("e.json"), json).unwrap();
            let c = Config::resolve(raw, file.clone(), &env(&[("HOME", "/h")])).unwrap();
            assert!(c.memory_more_model_dirs.is_empty(), "{json}");
            assert_eq!(c.effective()["memory"]["model"], "multilingual-e5-small");
        }

        for (json, vars, want) in [
            (
                r#"{"memory": {"model": []}}"#,
                &[][..],
                "memory.model: must name a model",
            ),
            (
                r#"{"memory": {"model": ["use-multilingual-v3", ""]}}"#,
                &[][..],
                "memory.model: must name a model",
            ),
            (
                r#"{"memory": {"model": ["multilingual-e5-small", "multilingual-e5-small"]}}"#,
                &[][..],
                "memory.model: lists \"multilingual-e5-small\" twice",
            ),
            (
                "{}",
                &[(
                    "KLAW_MEMORY_MODEL",
                    "use-multilingual-v3,,multilingual-e5-small",
                )][..],
                "memory.model (set by KLAW_MEMORY_MODEL): must name a model",
            ),
        ] {
            let raw = parse(Path::new("e.json"), json).unwrap();
            let mut vars = vars.to_vec();
            vars.push(("HOME", "/h"));
            let err = Config::resolve(raw, file.clone(), &env(&vars))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(want), "{json}: {err}");
        }
        let err = parse(Path::new("e.json"), r#"{"memory": {"model": 7}}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("a model name or path, or an array of them"),
            "{err}"
        );
    }

    #[test]
    fn memory_defaults_come_from_the_cache() {
        let c = resolve_defaults(&env(&[("HOME", "/h")])).unwrap();
        assert_eq!(c.raw.memory, MemorySection::default());
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/h/.cache/klaw/models/use-multilingual-v3"))
        );
        assert_eq!(
            c.memory_runtime_library,
            Some(PathBuf::from(
                "/h/.cache/klaw/onnxruntime/libonnxruntime.so.1.31.1"
            ))
        );
        assert!(c.memory_threads >= 1);
        let c = resolve_defaults(&env(&[("HOME", "/h"), ("KLAW_CACHE", "/c")])).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/c/models/use-multilingual-v3"))
        );
        let effective = c.effective();
        assert_eq!(
            effective["memory"]["runtimeLibrary"],
            "/c/onnxruntime/libonnxruntime.so.1.31.1"
        );
        assert_eq!(effective["memory"]["model"], "use-multilingual-v3");
        assert_eq!(effective["memory"]["weights"]["text"], 1.0);
        assert_eq!(effective["memory"]["chunkTokens"], 256);
    }

    #[test]
    fn memory_keys_from_the_file_and_the_environment() {
        let raw = parse(
            Path::new("/etc/klaw/engine.json"),
            r#"{"memory": {"model": "all-minilm-l6-v2", "threads": 2,
                "weights": {"text": 0.5}, "chunkTokens": 128, "chunkOverlap": 16}}"#,
        )
        .unwrap();
        let file = ConfigSource::File("/etc/klaw/engine.json".into());
        let c = Config::resolve(raw.clone(), file.clone(), &env(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/h/.cache/klaw/models/all-minilm-l6-v2"))
        );
        assert_eq!(c.memory_threads, 2);
        assert_eq!(
            c.raw.memory.weights,
            MemoryWeights {
                text: 0.5,
                vector: 1.0
            }
        );
        assert_eq!(
            (c.raw.memory.chunk_tokens, c.raw.memory.chunk_overlap),
            (128, 16)
        );

        // a path: relative to the file there, to the current directory from a variable
        let raw2 = parse(
            Path::new("/etc/klaw/engine.json"),
            r#"{"memory": {"model": "./models/mine", "runtimeLibrary": "~/lib/ort.so"}}"#,
        )
        .unwrap();
        let c = Config::resolve(raw2, file.clone(), &env(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/etc/klaw/./models/mine"))
        );
        assert_eq!(
            c.memory_runtime_library,
            Some(PathBuf::from("/h/lib/ort.so"))
        );

        let e = env(&[
            ("HOME", "/h"),
            ("KLAW_MEMORY_MODEL", "/opt/model"),
            ("KLAW_MEMORY_RUNTIME_LIBRARY", "/opt/libonnxruntime.so"),
            ("KLAW_MEMORY_THREADS", "3"),
            ("KLAW_MEMORY_TEXT_WEIGHT", "2"),
            ("KLAW_MEMORY_VECTOR_WEIGHT", " 0.25 "),
            ("KLAW_MEMORY_CHUNK_TOKENS", "64"),
            ("KLAW_MEMORY_CHUNK_OVERLAP", "8"),
        ]);
        let c = Config::resolve(raw, file, &e).unwrap();
        assert_eq!(c.memory_model_dir, Some(PathBuf::from("/opt/model")));
        assert_eq!(
            c.memory_runtime_library,
            Some(PathBuf::from("/opt/libonnxruntime.so"))
        );
        assert_eq!(c.memory_threads, 3);
        assert_eq!(
            c.raw.memory.weights,
            MemoryWeights {
                text: 2.0,
                vector: 0.25
            }
        );
        assert_eq!(
            (c.raw.memory.chunk_tokens, c.raw.memory.chunk_overlap),
            (64, 8)
        );
    }

    #[test]
    fn bad_memory_values_name_the_key() {
        let cases = [
            (
                r#"{"memory": {"threads": 0}}"#,
                "memory.threads: must be at least 1",
            ),
            (
                r#"{"memory": {"weights": {"text": 0}}}"#,
                "memory.weights.text: 0 must be",
            ),
            (
                r#"{"memory": {"weights": {"vector": -1}}}"#,
                "memory.weights.vector: -1 must be",
            ),
            (
                r#"{"memory": {"chunkTokens": 4}}"#,
                "memory.chunkTokens: must be at least 8",
            ),
            (
                r#"{"memory": {"chunkTokens": 64, "chunkOverlap": 32}}"#,
                "memory.chunkOverlap: 32 must be less than half of memory.chunkTokens (64)",
            ),
            (
                r#"{"memory": {"model": ""}}"#,
                "memory.model: must name a model",
            ),
        ];
        for (json, want) in cases {
            let raw = parse(Path::new("e.json"), json).unwrap();
            let err = Config::resolve(
                raw,
                ConfigSource::Defaults("x".into()),
                &env(&[("HOME", "/h")]),
            )
            .unwrap_err()
            .to_string();
            assert!(err.starts_with(want), "{json}: {err}");
        }
        let err = parse(Path::new("e.json"), r#"{"memory": {"modelDir": "x"}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `modelDir`"), "{err}");
        let err = parse(
            Path::new("e.json"),
            r#"{"memory": {"weights": {"fts": 1}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown field `fts`"), "{err}");
        let e = env(&[("HOME", "/h"), ("KLAW_MEMORY_TEXT_WEIGHT", "high")]);
        let err = resolve_defaults(&e).unwrap_err().to_string();
        assert_eq!(
            err,
            "environment variable KLAW_MEMORY_TEXT_WEIGHT=\"high\": expected a number"
        );
        let e = env(&[("HOME", "/h"), ("KLAW_MEMORY_THREADS", "0")]);
        let err = resolve_defaults(&e).unwrap_err().to_string();
        assert_eq!(
            err,
            "memory.threads (set by KLAW_MEMORY_THREADS): must be at least 1"
        );
    }

    #[cfg(feature = "memory")]
    #[test]
    fn memory_defaults_are_the_memory_modules_and_become_its_config() {
        use klaw_tools::tools::memory::{ChunkOptions, Weights};
        let c = resolve_defaults(&env(&[("HOME", "/h")])).unwrap();
        let m = c.memory();
        assert_eq!(m.chunk, ChunkOptions::default());
        assert_eq!(m.weights, Weights::default());
        assert_eq!(m.model_dir, c.memory_model_dir);
        assert_eq!(m.runtime_library, c.memory_runtime_library);
        assert_eq!(m.threads, Some(c.memory_threads));
        // The model and runtime library memory falls back to are the config's defaults.
        let (model, library) = klaw_tools::tools::memory::EmbedderConfig::default_paths().unwrap();
        assert_eq!(model.file_name().unwrap(), DEFAULT_MEMORY_MODEL);
        assert_eq!(library.file_name().unwrap(), DEFAULT_RUNTIME_LIBRARY);
    }
}
