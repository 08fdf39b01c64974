#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The embedding model through `ort` + `tokenizers`, against the files `make setup`
//! installs. Missing files fail the tests with the setup hint: CI runs setup first.

use std::sync::OnceLock;

use klaw_memory::{EmbedError, Embedder, EmbedderConfig, TextKind};

use crate::support::reference::{TOLERANCE, Variant, max_diffs, reference, references};

/// The default model's directory name under `<cache>/models`.
const E5: &str = "multilingual-e5-small";

/// One embedder for the whole test binary (ONNX Runtime is initialised once per process).
fn embedder() -> &'static Embedder {
    static E: OnceLock<Embedder> = OnceLock::new();
    E.get_or_init(|| {
        let config = EmbedderConfig::from_cache_model(E5).unwrap_or_else(|e| panic!("{e}"));
        let e = Embedder::new(config);
        e.load().unwrap_or_else(|e| panic!("{e}"));
        e
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

const RU: &str = "Москва — столица России, крупнейший по численности населения город страны.";
const EN: &str = "Moscow is the capital of Russia and the country's most populous city.";
const UNRELATED: &str = "The recipe needs two cups of flour, one egg and a pinch of salt.";

#[test]
fn russian_sentence_is_closest_to_its_english_translation() {
    let e = embedder();
    let v = e.embed_passages(&[RU, EN, UNRELATED]).unwrap();
    let (ru_en, ru_other, en_other) = (dot(&v[0], &v[1]), dot(&v[0], &v[2]), dot(&v[1], &v[2]));
    assert!(
        ru_en > ru_other + 0.05,
        "ru-en {ru_en}, ru-unrelated {ru_other}"
    );
    assert!(
        ru_en > en_other + 0.05,
        "ru-en {ru_en}, en-unrelated {en_other}"
    );

    // and as retrieval: a Russian query finds the English passage first
    let q = e.embed_queries(&["какой город столица России?"]).unwrap();
    let p = e.embed_passages(&[UNRELATED, EN]).unwrap();
    assert!(dot(&q[0], &p[1]) > dot(&q[0], &p[0]));
}

#[test]
fn embeddings_have_unit_length_and_the_configured_dims() {
    let e = embedder();
    let v = e
        .embed_queries(&["как дела?", "how are you?", "", "🍕☕️"])
        .unwrap();
    assert_eq!(v.len(), 4);
    for x in &v {
        assert_eq!(x.len(), e.dims());
        let norm = dot(x, x).sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }
}

#[test]
fn batch_results_equal_single_results_in_callers_order() {
    let e = embedder();
    // lengths deliberately out of order so sorting by length reorders them
    let long = "word ".repeat(60);
    let texts = [EN, "hi", long.as_str(), RU, "как дела?", UNRELATED];
    let batch = e.embed_passages(&texts).unwrap();
    assert_eq!(batch.len(), texts.len());
    for (t, b) in texts.iter().zip(&batch) {
        let single = e.embed_passages(&[t]).unwrap().remove(0);
        let max_diff = single
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(max_diff < 1e-4, "{t:?}: max diff {max_diff}");
    }
}

#[test]
fn small_batches_equal_one_big_batch() {
    let config = EmbedderConfig::from_cache_model(E5).unwrap_or_else(|e| panic!("{e}"));
    let small = Embedder::new(EmbedderConfig {
        batch_size: 2,
        ..config
    });
    let texts = [UNRELATED, "a", RU, "bb cc", EN];
    let a = small.embed(TextKind::Passage, &texts).unwrap();
    let b = embedder().embed(TextKind::Passage, &texts).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert!(dot(x, y) > 0.9999);
    }
}

/// Texts for the reference checks: both languages, both kinds of text, a long one, and
/// characters outside the usual vocabulary.
fn reference_texts() -> Vec<String> {
    vec![
        "Klaw remembers what matters.".into(),
        "где хранятся заметки?".into(),
        RU.into(),
        "hi".into(),
        "The memory index keeps every note the agent saves. ".repeat(30),
        "Tabs\tand\nnewlines, UPPER case, café, 東京 and 🍕.".into(),
    ]
}

/// The Rust pipeline (prefix, tokenizer, the model, pooling, normalisation) equals Python
/// onnxruntime + tokenizers run now, on this machine, with the same files: a reference
/// written into the test once would check the CPU it was taken on (issue 18).
#[test]
fn matches_python_onnxruntime_reference() {
    let texts = reference_texts();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    for kind in [TextKind::Passage, TextKind::Query] {
        let got = embedder().embed(kind, &texts).unwrap();
        let want = reference(E5, kind, Variant::Correct, &texts);
        for (t, d) in texts.iter().zip(max_diffs(&got, &want)) {
            eprintln!("{kind:?} {:<30} max |rust - python| = {d:.2e}", preview(t));
            assert!(d < TOLERANCE, "{kind:?} {t:?}: max diff {d:.2e}");
        }
    }
}

/// The reference check above can fail: with the prefix, the pooling, the normalisation
/// or the tokenization done wrong on the reference side, the same Rust vectors are far
/// outside the tolerance (by a factor of at least ten).
#[test]
fn the_reference_check_catches_a_broken_step() {
    let texts = reference_texts();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let broken = [
        Variant::NoPrefix,
        Variant::OtherPrefix,
        Variant::OtherPooling,
        Variant::NotNormalized,
        Variant::NoSpecialTokens,
        Variant::Lowercased,
    ];
    for kind in [TextKind::Passage, TextKind::Query] {
        let got = embedder().embed(kind, &texts).unwrap();
        let wants = references(E5, kind, &broken, &texts);
        for (variant, want) in broken.into_iter().zip(&wants) {
            for (t, d) in texts.iter().zip(max_diffs(&got, want)) {
                eprintln!("{kind:?} {variant:?} {:<30} max diff {d:.2e}", preview(t));
                // Lowercasing leaves a text without capitals as it was.
                let same_text = variant == Variant::Lowercased && t.to_lowercase() == *t;
                if !same_text {
                    assert!(
                        d > 10.0 * TOLERANCE,
                        "{kind:?} {variant:?} {t:?}: max diff {d:.2e}"
                    );
                }
            }
        }
    }
}

fn preview(t: &str) -> String {
    let s: String = t.chars().take(28).collect();
    format!("{s:?}")
}

#[test]
fn long_texts_are_truncated_to_max_tokens() {
    let e = embedder();
    let long = "память ".repeat(2000);
    assert_eq!(
        e.count_tokens(TextKind::Passage, &long).unwrap(),
        e.config().max_tokens
    );
    let v = e.embed_passages(&[&long]).unwrap();
    assert_eq!(v[0].len(), e.dims());
}

#[test]
fn fingerprint_comes_from_klaw_model_json() {
    let e = embedder();
    assert!(
        e.fingerprint().starts_with("sha256:"),
        "{}",
        e.fingerprint()
    );
    assert_eq!(e.config().query_prefix, "query: ");
    assert_eq!(e.config().passage_prefix, "passage: ");
}

#[test]
fn missing_model_dir_gives_the_setup_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("models").join("nothing-here");
    let err = EmbedderConfig::load(&missing, dir.path().join("libonnxruntime.so")).unwrap_err();
    assert!(matches!(&err, EmbedError::ModelMissing { path } if path == &missing));
    let msg = err.to_string();
    assert!(msg.contains(&missing.display().to_string()), "{msg}");
    assert!(msg.contains("make setup"), "{msg}");
}

#[test]
fn missing_runtime_library_gives_the_setup_error() {
    let (model_dir, _) = EmbedderConfig::default_paths().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libonnxruntime.so.1.31.1");
    let err = EmbedderConfig::load(&model_dir, &lib).unwrap_err();
    assert!(
        matches!(&err, EmbedError::RuntimeMissing { path } if path == &lib),
        "{err}"
    );
    assert!(err.to_string().contains("make setup"));
}

#[tokio::test]
async fn embed_async_runs_on_the_blocking_pool() {
    let e = embedder().clone();
    let v = tokio::spawn(async move {
        e.embed_async(TextKind::Query, vec!["hello".into(), "привет".into()])
            .await
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(v.len(), 2);
}
