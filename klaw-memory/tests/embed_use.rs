#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The Universal Sentence Encoder (the default model, `use-multilingual-v3`): its ragged
//! inputs (`token_ids` + `row_splits`, no padding) through `ort`, on the files
//! `make setup` converts. Missing files fail with the setup hint.

use klaw_memory::{Embedder, EmbedderConfig, InputFormat, TextKind};

fn embedder() -> Embedder {
    let config =
        EmbedderConfig::from_cache_model("use-multilingual-v3").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.input, InputFormat::Ragged);
    assert_eq!((config.dims, config.output.as_str()), (512, "embeddings"));
    Embedder::new(config)
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn vectors_are_unit_length_and_independent_of_their_batch_mates() {
    let e = embedder();
    let texts = [
        "Где у нас лежат запасные ключи?",
        "",
        "The spare keys are with the neighbour in flat 12.",
        &"очень длинный текст ".repeat(2000),
        "a",
    ];
    let together = e.embed(TextKind::Passage, &texts).unwrap();
    assert_eq!(together.len(), texts.len());
    for (t, v) in texts.iter().zip(&together) {
        assert_eq!(v.len(), 512);
        let norm = dot(v, v).sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm} for {:.20}", t);
        // fp32 matmuls: the same vector alone as in a batch (int8 ones would move)
        let alone = e.embed(TextKind::Passage, &[t]).unwrap();
        assert!(dot(v, &alone[0]) > 0.99999, "{:.20}", t);
    }
}

#[test]
fn a_translation_is_nearer_than_a_same_language_text_on_another_topic() {
    let e = embedder();
    let q = e
        .embed_queries(&["Где у нас лежат запасные ключи?"])
        .unwrap();
    let p = e
        .embed_passages(&[
            "The spare keys are with the neighbour in flat 12.",
            "Запасной аккумулятор для дрели лежит в гараже.",
        ])
        .unwrap();
    let (translation, other) = (dot(&q[0], &p[0]), dot(&q[0], &p[1]));
    assert!(translation > other, "{translation} vs {other}");
}

#[test]
fn tokens_are_counted_with_the_sentence_marks() {
    let e = embedder();
    // <s> and </s> around the pieces; nothing at all is still two tokens
    assert_eq!(e.count_tokens(TextKind::Query, "").unwrap(), 2);
    assert!(e.count_tokens(TextKind::Query, "привет, мир").unwrap() > 2);
}
