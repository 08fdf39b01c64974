#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The memory index end to end: the real model (installed by `make setup`) and a real
//! SQLite database in a temporary directory.

use klaw_tools::tools::memory::{
    Chunk, Document, Embedder, EmbedderConfig, Index, MemoryConfig, MemoryError, SearchMode,
    SyncDoc,
};

fn embedder() -> Embedder {
    Embedder::new(EmbedderConfig::from_cache().expect("the model is installed by `make setup`"))
}

/// The light English model, also installed by `make setup` (see `tests/embed_minilm.rs`).
fn another_model() -> Embedder {
    let (_, lib) = EmbedderConfig::default_paths().unwrap();
    let dir = EmbedderConfig::cache_dir()
        .unwrap()
        .join("models")
        .join("all-minilm-l6-v2");
    Embedder::new(EmbedderConfig::load(dir, lib).expect("installed by `make setup`"))
}

fn doc(content: &str) -> Document {
    Document {
        content: content.into(),
        source: "test".into(),
        created_at: Some(1_700_000_000),
        context: None,
    }
}

#[test]
fn save_search_remove_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let index = Index::open(&path, embedder(), &MemoryConfig::default()).unwrap();
    let r = index
        .save(&doc("Пользователь предпочитает зелёный чай без сахара."))
        .unwrap();
    assert_eq!((r.chunks, r.inserted, r.duplicates), (1, 1, 0));
    let again = index
        .save(&doc("Пользователь предпочитает зелёный чай без сахара."))
        .unwrap();
    assert_eq!((again.inserted, again.duplicates), (0, 1));
    index
        .save(&Document {
            source: "notes.md".into(),
            ..doc("The staging server is srv-db-07 in Frankfurt.")
        })
        .unwrap();
    assert!(matches!(
        index.save(&doc(" \n\n ")),
        Err(MemoryError::Empty)
    ));

    // Cross-language: a Russian question finds the English note by meaning only.
    let hits = index
        .search("какой сервер для тестовой среды?", 1, SearchMode::Vector)
        .unwrap();
    assert!(hits[0].content.contains("srv-db-07"), "{hits:?}");
    let hits = index.search("srv-db-07", 2, SearchMode::Text).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].source, "notes.md");
    assert_eq!(hits[0].date, "2023-11-14");
    let hits = index.search("чай", 2, SearchMode::Hybrid).unwrap();
    assert!(hits[0].content.contains("чай"));

    assert_eq!(index.remove_source("notes.md").unwrap(), 1);
    assert!(
        index
            .search("srv-db-07", 5, SearchMode::Text)
            .unwrap()
            .is_empty()
    );
    drop(index);
    let index = Index::open(&path, embedder(), &MemoryConfig::default()).unwrap();
    assert_eq!(index.len().unwrap(), 1);
    assert_eq!(index.reembedded(), 0);
}

#[test]
fn an_index_of_another_model_is_reembedded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let e = embedder();
    let other = another_model();
    assert_ne!(other.fingerprint(), e.fingerprint());
    {
        let index = Index::open(&path, other, &MemoryConfig::default()).unwrap();
        index
            .save(&Document {
                source: "manual".into(),
                ..doc("Meeting with Anna on Friday at 10:00.")
            })
            .unwrap();
    }
    let index = Index::open(&path, e, &MemoryConfig::default()).unwrap();
    assert_eq!(index.reembedded(), 1);
    let hits = index
        .search("когда встреча с Анной?", 1, SearchMode::Vector)
        .unwrap();
    assert!(hits[0].content.contains("Anna"));
    // a cosine, not a fixed value: models differ in scale (e5's unrelated texts score
    // about 0.7, the Universal Sentence Encoder's about 0.1)
    assert!(hits[0].score > 0.2, "{hits:?}");
}

#[test]
fn sync_keeps_each_document_with_its_sections_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(
        &dir.path().join("docs.sqlite"),
        embedder(),
        &MemoryConfig::default(),
    )
    .unwrap();
    let chunk = |source: &str, content: &str| Chunk {
        source: source.into(),
        content: content.into(),
    };
    let doc = |chunks: Vec<Chunk>| SyncDoc {
        key: "a.md".into(),
        version: "1".into(),
        chunks,
    };
    for foreign in ["b.md", "a.mdx", "a.md.bak#x", ""] {
        let e = index
            .sync(&[doc(vec![chunk(foreign, "Alpha.")])], false)
            .unwrap_err();
        assert!(
            matches!(e, MemoryError::ForeignSource { .. }),
            "{foreign}: {e}"
        );
    }
    assert!(index.is_empty().unwrap(), "nothing stored");
    let a = doc(vec![chunk("a.md", "Intro."), chunk("a.md#alpha", "Alpha.")]);
    let r = index.sync(std::slice::from_ref(&a), false).unwrap();
    assert_eq!((r.indexed, r.unchanged, r.removed, r.chunks), (1, 0, 0, 2));
    let r = index.sync(&[a], false).unwrap();
    assert_eq!((r.indexed, r.unchanged, r.removed, r.chunks), (0, 1, 0, 0));
    assert_eq!(index.len().unwrap(), 2);
    let r = index.sync(&[], false).unwrap();
    assert_eq!((r.indexed, r.unchanged, r.removed), (0, 0, 1));
    assert!(index.is_empty().unwrap());
}
