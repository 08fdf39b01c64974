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

/// Issue 32: opening looks for chunks without a vector only when the store says some may
/// be missing: after a re-embedding that did not finish, or once in a store made before
/// it said so; not on every open.
#[test]
fn only_an_unfinished_reembedding_makes_open_look_for_chunks_without_vectors() {
    use klaw_tools::tools::memory::bench_support::MemoryStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let e = embedder();
    let notes = [
        "Meeting with Anna on Friday at 10:00.",
        "The staging server is srv-db-07 in Frankfurt.",
        "Пользователь предпочитает зелёный чай без сахара.",
    ];
    {
        let index = Index::open(&path, another_model(), &MemoryConfig::default()).unwrap();
        for n in notes {
            index.save(&doc(n)).unwrap();
        }
    }
    // A re-embedding for `e` that dies after one chunk: the next open finishes it.
    {
        let mut store = MemoryStore::open_reembed(&path, e.dims(), e.fingerprint()).unwrap();
        let todo = store.chunks_without_vectors().unwrap();
        assert_eq!(todo.len(), 3);
        let v = e.embed_passages(&[todo[0].1.as_str()]).unwrap();
        store.set_vectors(&[(todo[0].0, v[0].clone())]).unwrap();
    }
    let index = Index::open(&path, e.clone(), &MemoryConfig::default()).unwrap();
    assert_eq!(index.reembedded(), 2);
    let hits = index
        .search("какой сервер для тестовой среды?", 1, SearchMode::Vector)
        .unwrap();
    assert!(hits[0].content.contains("srv-db-07"), "{hits:?}");
    drop(index);

    // Every chunk has its vector and the store says so: a vector lost behind its back
    // (by hand here) is not looked for, as no open scans.
    klaw_sqlite_vec::register().unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute(
        "DELETE FROM chunks_vec WHERE rowid = (SELECT min(id) FROM chunks)",
        [],
    )
    .unwrap();
    let index = Index::open(&path, e.clone(), &MemoryConfig::default()).unwrap();
    assert_eq!(index.reembedded(), 0);
    drop(index);

    // A store made before it said (no flag): looked through once, then not again.
    raw.execute("DELETE FROM meta WHERE key = 'vectors_complete'", [])
        .unwrap();
    let index = Index::open(&path, e.clone(), &MemoryConfig::default()).unwrap();
    assert_eq!(index.reembedded(), 1);
    drop(index);
    let index = Index::open(&path, e, &MemoryConfig::default()).unwrap();
    assert_eq!(index.reembedded(), 0);
    assert_eq!(index.len().unwrap(), 3);
}
