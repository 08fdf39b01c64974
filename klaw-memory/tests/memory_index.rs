#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The memory index end to end: the real model (installed by `make setup`) and a real
//! SQLite database in a temporary directory.

use klaw_memory::{
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

/// Asserts that `index`'s first hit for `query` in `mode` contains `needle`.
fn finds_first(index: &Index, query: &str, mode: SearchMode, needle: &str) {
    let hits = index.search(query, 1, mode).unwrap();
    assert!(
        hits.first().is_some_and(|h| h.content.contains(needle)),
        "{query:?} ({mode:?}): {hits:?}"
    );
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
    finds_first(
        &index,
        "какой сервер для тестовой среды?",
        SearchMode::Vector,
        "srv-db-07",
    );
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
    use klaw_memory::bench_support::MemoryStore;
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
    finds_first(
        &index,
        "какой сервер для тестовой среды?",
        SearchMode::Vector,
        "srv-db-07",
    );
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

/// multilingual-e5-small, the second model of the two-model option (`make setup-test`
/// installs it).
fn e5() -> Embedder {
    Embedder::new(
        EmbedderConfig::from_cache_model("multilingual-e5-small")
            .expect("installed by `make setup-test`"),
    )
}

/// The vector spaces' own tables (besides `chunks_vec`, the first model's).
fn named_spaces(path: &std::path::Path) -> Vec<String> {
    let raw = rusqlite::Connection::open(path).unwrap();
    let mut st = raw
        .prepare("SELECT name FROM sqlite_master WHERE name GLOB 'space_*_codes' ORDER BY name")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

const NOTES: [&str; 4] = [
    "Meeting with Anna on Friday at 10:00.",
    "The staging server is srv-db-07 in Frankfurt.",
    "Пользователь предпочитает зелёный чай без сахара.",
    "Кошка по кличке Мурка боится пылесоса.",
];

/// Issue 30, two models: every chunk is embedded by both, each into its own space, and
/// search finds through either: with the first model's vector of a note gone (by hand;
/// the store says every vector is there, so nothing re-embeds it) the second model's
/// space still finds it by meaning.
#[test]
fn two_models_save_into_two_spaces_and_search_finds_through_both() {
    use klaw_memory::bench_support;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let index =
        Index::open_models(&path, vec![embedder(), e5()], &MemoryConfig::default()).unwrap();
    assert_eq!(index.embedders().len(), 2);
    for n in NOTES {
        assert_eq!(index.save(&doc(n)).unwrap().inserted, 1);
    }
    assert_eq!(bench_support::store(&index).spaces(), 2);
    assert_eq!(named_spaces(&path).len(), 1, "one space beside the first");
    for mode in [SearchMode::Hybrid, SearchMode::Vector] {
        finds_first(
            &index,
            "какой сервер для тестовой среды?",
            mode,
            "srv-db-07",
        );
        finds_first(&index, "what is the cat afraid of?", mode, "Мурка");
    }
    let hits = index.search("srv-db-07", 1, SearchMode::Hybrid).unwrap();
    assert_eq!(hits[0].found_by, klaw_memory::FoundBy::Both);
    drop(index);

    // the first model's vector of the server note removed behind the store's back
    klaw_sqlite_vec::register().unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    let id: i64 = raw
        .query_row(
            "SELECT id FROM chunks WHERE content LIKE '%srv-db-07%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    raw.execute("DELETE FROM chunks_vec WHERE rowid = ?1", [id])
        .unwrap();
    raw.execute("DELETE FROM chunks_codes WHERE id = ?1", [id])
        .unwrap();
    let index =
        Index::open_models(&path, vec![embedder(), e5()], &MemoryConfig::default()).unwrap();
    assert_eq!(index.reembedded(), 0);
    finds_first(
        &index,
        "which server is used for staging?",
        SearchMode::Vector,
        "srv-db-07",
    );
    // the one-model index of the first model alone does not find it any more
    drop(index);
    let alone = Index::open(&path, embedder(), &MemoryConfig::default()).unwrap();
    let hits = alone
        .search("which server is used for staging?", 4, SearchMode::Vector)
        .unwrap();
    assert!(hits.iter().all(|h| h.id != id), "{hits:?}");
}

/// Issue 30: changing the list embeds only for a model new to the index, whatever the
/// order; a model no longer listed loses its space; an index of one model opened with it
/// first does not re-embed it.
#[test]
fn a_changed_model_list_embeds_only_the_new_space_and_drops_the_removed_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let config = MemoryConfig::default();
    {
        let index = Index::open(&path, embedder(), &config).unwrap();
        for n in NOTES {
            index.save(&doc(n)).unwrap();
        }
    }
    let opened = |models: Vec<Embedder>| {
        let index = Index::open_models(&path, models, &config).unwrap();
        let r = index.reembedded_by_model().to_vec();
        finds_first(&index, "когда встреча с Анной?", SearchMode::Hybrid, "Anna");
        r
    };
    assert_eq!(
        opened(vec![embedder(), e5()]),
        [0, 4],
        "only e5's space is new"
    );
    assert_eq!(named_spaces(&path).len(), 1);
    assert_eq!(opened(vec![embedder(), e5()]), [0, 0]);
    assert_eq!(opened(vec![e5(), embedder()]), [0, 0], "the order alone");
    assert_eq!(opened(vec![embedder()]), [0], "e5's space dropped");
    assert!(named_spaces(&path).is_empty());
    assert_eq!(opened(vec![embedder(), e5()]), [0, 4], "and made again");
    // the first space's model no longer listed: dropped, and e5 keeps its own
    assert_eq!(opened(vec![e5()]), [0]);
    assert_eq!(opened(vec![embedder()]), [4]);
    assert!(named_spaces(&path).is_empty());
}

/// Issue 30: a second space's embedding that dies part way is finished by the next open,
/// and only that space's missing chunks are embedded.
#[test]
fn an_interrupted_second_space_is_completed_on_open() {
    use klaw_memory::bench_support::MemoryStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let (first, second) = (embedder(), e5());
    {
        let index = Index::open(&path, first.clone(), &MemoryConfig::default()).unwrap();
        for n in NOTES {
            index.save(&doc(n)).unwrap();
        }
    }
    {
        let specs = [
            (first.dims(), first.fingerprint()),
            (second.dims(), second.fingerprint()),
        ];
        let (mut store, opened) = MemoryStore::open_models(&path, &specs, false).unwrap();
        assert_eq!(opened.new, [false, true]);
        assert!(!store.vectors_pending_in(0).unwrap());
        let todo = store.chunks_without_vectors_in(1).unwrap();
        assert_eq!(todo.len(), 4);
        let v = second.embed_passages(&[todo[0].1.as_str()]).unwrap();
        store
            .set_vectors_in(1, &[(todo[0].0, v[0].clone())])
            .unwrap();
        assert!(store.vectors_pending_in(1).unwrap());
    }
    let index = Index::open_models(
        &path,
        vec![first.clone(), second.clone()],
        &MemoryConfig::default(),
    )
    .unwrap();
    assert_eq!(index.reembedded_by_model(), [0, 3]);
    finds_first(
        &index,
        "what is the cat afraid of?",
        SearchMode::Vector,
        "Мурка",
    );
    drop(index);
    let index = Index::open_models(&path, vec![first, second], &MemoryConfig::default()).unwrap();
    assert_eq!(index.reembedded_by_model(), [0, 0]);
}

/// Issue 30: the mistakes a list of models can hold, each a clear error; a model that
/// is not installed is "not set up", as the one model always was.
#[test]
fn a_model_list_without_a_model_with_one_twice_or_with_one_missing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let config = MemoryConfig::default();
    let e = Index::open_models(&path, Vec::new(), &config).unwrap_err();
    assert!(matches!(e, MemoryError::NoModel), "{e}");
    let e = Index::open_models(&path, vec![embedder(), embedder()], &config).unwrap_err();
    assert!(
        matches!(&e, MemoryError::SameModelTwice { name, .. } if name == "use-multilingual-v3"),
        "{e}"
    );
    assert!(e.to_string().contains("listed twice"), "{e}");

    let (models, _) = EmbedderConfig::default_paths().unwrap();
    let missing = MemoryConfig {
        more_model_dirs: vec![models.with_file_name("no-such-model")],
        ..MemoryConfig::default()
    };
    let e = missing.embedder_configs().unwrap_err();
    assert!(e.needs_setup(), "{e}");
    let tool = klaw_core::ToolError::from(MemoryError::Embed(e));
    assert!(
        tool.to_string().contains("memory is not set up")
            && tool.to_string().contains("no-such-model"),
        "{tool}"
    );
    let two = MemoryConfig {
        more_model_dirs: vec![models.with_file_name("multilingual-e5-small")],
        ..MemoryConfig::default()
    };
    let names: Vec<String> = two
        .embedder_configs()
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["use-multilingual-v3", "multilingual-e5-small"]);
}
