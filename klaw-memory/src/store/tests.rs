//! The memory store end to end on a real SQLite database in a temporary directory. The
//! vectors are unit vectors built here (8 dimensions): this tests the index, not a model.

use super::*;
use crate::vectors::random_unit;
use std::path::PathBuf;

const DIMS: usize = 8;
const FP: &str = "sha256:test-model";

fn unit(i: usize) -> Vec<f32> {
    let mut v = vec![0.0; DIMS];
    v[i] = 1.0;
    v
}

fn chunk(content: &str, v: Vec<f32>) -> NewChunk {
    NewChunk {
        content: content.to_string(),
        source: "test".to_string(),
        created_at: Some(1_700_000_000), // 2023-11-14 22:13:20 UTC
        vector: v,
        more_vectors: Vec::new(),
        context: None,
    }
}

/// [`chunk`] at Unix second `t`.
fn at(content: &str, v: Vec<f32>, t: i64) -> NewChunk {
    NewChunk {
        created_at: Some(t),
        ..chunk(content, v)
    }
}

fn db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    (dir, path)
}

fn sample(store: &mut MemoryStore) {
    let r = store
        .insert(&[
            chunk("Кошка спит на диване весь день.", unit(0)),
            chunk("The dog runs in the park every morning.", unit(1)),
            chunk("Rust has a borrow checker.", unit(2)),
            chunk("Собаки лают на почтальона.", unit(3)),
        ])
        .unwrap();
    assert_eq!(r.inserted, 4);
}

#[test]
fn wal_mode_is_on() {
    let (_d, path) = db();
    let store = MemoryStore::open(&path, DIMS, FP).unwrap();
    assert_eq!(store.journal_mode().unwrap(), "wal");
}

#[test]
fn russian_word_forms_match() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    let hits = store.search_text("кошками", 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].content.starts_with("Кошка"));
    assert_eq!(hits[0].found_by, FoundBy::Text);
    assert_eq!(hits[0].date, "2023-11-14");
    assert_eq!(hits[0].source, "test");
    let hits = store.search_text("собакой", 5).unwrap();
    assert!(hits[0].content.starts_with("Собаки"));
}

#[test]
fn english_word_forms_match() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    let hits = store.search_text("running dogs", 5).unwrap();
    assert!(hits[0].content.starts_with("The dog"), "{hits:?}");
}

#[test]
fn vector_search_finds_the_nearest() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    // Mostly axis 2, a little axis 0; not normalised: the store normalises.
    let mut q = vec![0.0; DIMS];
    q[2] = 3.0;
    q[0] = 1.0;
    let hits = store.search_vector(&q, 2).unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits[0].content.starts_with("Rust"));
    assert!(hits[1].content.starts_with("Кошка"));
    let cos = 3.0 / 10f64.sqrt();
    assert!((hits[0].score - cos).abs() < 1e-5, "{}", hits[0].score);
    assert!(hits[0].score > hits[1].score);
    assert_eq!(hits[0].found_by, FoundBy::Vector);
}

#[test]
fn hybrid_fuses_both_sides() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    // Text finds the cat; the vector points at the cat first, then Rust.
    let mut q = vec![0.0; DIMS];
    q[0] = 1.0;
    q[2] = 0.5;
    let hits = store
        .search_hybrid("кошка", &q, 3, Weights::default())
        .unwrap();
    // the default fusion: the cosine plus 0.5 × the share of the query's words (by IDF)
    let norm = 1.25f64.sqrt();
    assert!(hits[0].content.starts_with("Кошка"));
    assert_eq!(hits[0].found_by, FoundBy::Both);
    assert!(
        (hits[0].score - (1.0 / norm + 0.5)).abs() < 1e-5,
        "{}",
        hits[0].score
    );
    assert!(hits[1].content.starts_with("Rust"));
    assert_eq!(hits[1].found_by, FoundBy::Vector);
    assert!(
        (hits[1].score - 0.5 / norm).abs() < 1e-5,
        "{}",
        hits[1].score
    );
    assert!(hits.len() <= 3);
}

#[test]
fn rrf_ranks_a_chunk_both_sides_found_first() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    let mut q = vec![0.0; DIMS];
    q[0] = 1.0;
    q[2] = 0.5;
    let text = store
        .hybrid_text_side("кошка", 3, Period::default())
        .unwrap();
    let vecs = store.search_vector(&q, 3).unwrap();
    let hits = store
        .fuse("кошка", &q, text, vecs, 3, Weights::default(), Fusion::Rrf)
        .unwrap();
    assert!(hits[0].content.starts_with("Кошка"));
    assert_eq!(hits[0].found_by, FoundBy::Both);
    assert!((hits[0].score - 2.0 / 61.0).abs() < 1e-12);
    assert!(hits[1].content.starts_with("Rust"));
    assert!((hits[1].score - 1.0 / 62.0).abs() < 1e-12);
}

/// Issue 30: a question in one language, its answer in the other. The text side finds
/// the same-topic note in the question's language by a common word; the vector side puts
/// the answer first. RRF let the note found twice win; the default fusion keeps the answer.
#[test]
fn words_do_not_beat_the_answer_in_another_language() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    let mut v_answer = unit(0);
    v_answer[1] = 0.3;
    let mut v_same_topic = unit(0);
    v_same_topic[1] = -0.5;
    store
        .insert(&[
            chunk(
                "The user's favourite coffee beans come from Square Mile.",
                v_answer,
            ),
            chunk("Пользователь пьёт кофе без сахара.", v_same_topic),
            chunk("Пользователь живёт на девятом этаже.", unit(3)),
            chunk("Пользователь бегает по утрам.", unit(4)),
        ])
        .unwrap();
    let q = unit(0);
    let query = "какой кофе любит пользователь";
    let run = |fusion| {
        let text = store
            .hybrid_text_side(query, 10, Period::default())
            .unwrap();
        let vecs = store.search_vector(&q, 10).unwrap();
        store
            .fuse(query, &q, text, vecs, 10, Weights::default(), fusion)
            .unwrap()
    };
    let rrf = run(Fusion::Rrf);
    assert!(rrf[0].content.starts_with("Пользователь пьёт"), "{rrf:?}");
    let fused = run(Fusion::DEFAULT);
    assert!(fused[0].content.starts_with("The user's"), "{fused:?}");
}

/// Issue 49, `Evidence::IdfGraded` (a candidate): when the vector side's best chunk is in
/// the other script, the gate gives every chunk of that script the best evidence of the
/// query's, and a crowd of them at a middling cosine passes the answer in the query's
/// language; graded by the cosine's place, only the ones near the best keep it.
#[test]
fn a_graded_gate_keeps_the_answer_above_a_crowd_in_the_other_language() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    let at = |cos: f32, axis: usize| {
        let mut v = unit(axis);
        v[0] = cos;
        v[axis] = (1.0 - cos * cos).sqrt();
        v
    };
    store
        .insert(&[
            chunk("We watched a film about ships.", at(0.5, 1)),
            chunk("The weather was lovely today.", at(0.35, 2)),
            chunk("Our neighbours bought a new car.", at(0.35, 3)),
            chunk("The train was late again.", at(0.35, 4)),
            chunk("Ольга пьёт чай вместо кофе.", at(0.3, 5)),
            chunk("Дмитрий любит футбол.", unit(6)),
        ])
        .unwrap();
    let q = unit(0);
    let query = "что пьёт Ольга вместо кофе";
    let rank = |fusion: Fusion| {
        let text = store
            .hybrid_text_side(query, 10, Period::default())
            .unwrap();
        let vecs = store.search_vector(&q, 10).unwrap();
        let fused = store
            .fuse(query, &q, text, vecs, 10, Weights::default(), fusion)
            .unwrap();
        fused
            .iter()
            .position(|h| h.content.starts_with("Ольга"))
            .unwrap()
    };
    // the whole evidence: the three English turns at 0.35 pass the answer at 0.3
    assert_eq!(rank(Fusion::DEFAULT), 4);
    // graded: only the best English turn stays above it
    assert_eq!(
        rank(Fusion::DEFAULT.with_evidence(Evidence::IdfGraded(1.0))),
        1
    );
}

/// Issue 49: with the default fusion the hybrid's text side proposes the chunks with most
/// of the question's words first, then tops up with those holding fewer (the any-word
/// search), so a right turn that shares only one word is still a candidate the fusion
/// weighs; RRF, which fuses ranks, keeps the rule alone.
#[test]
fn the_text_side_is_topped_up_for_the_lift_only() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    store
        .insert(&[
            chunk("Maria started the pottery course in May.", unit(0)),
            chunk("The pottery class was fun.", unit(1)),
            chunk("Rust has a borrow checker.", unit(2)),
        ])
        .unwrap();
    let query = "when did Maria start the pottery course";
    let side = |fusion, k| {
        let most = store.hybrid_text_side(query, k, Period::default()).unwrap();
        let text = text_side_for(&store, query, fusion, most, k, |q| {
            store.search_text_in(q, k, Period::default())
        })
        .unwrap();
        text.into_iter().map(|h| h.content).collect::<Vec<_>>()
    };
    let (most, fewer) = (
        "Maria started the pottery course in May.",
        "The pottery class was fun.",
    );
    assert_eq!(side(Fusion::DEFAULT, 10), [most, fewer]);
    assert_eq!(side(Fusion::Rrf, 10), [most]);
    // with room for one, the one with most of the words only
    assert_eq!(side(Fusion::DEFAULT, 1), [most]);
    let hits = store
        .search_hybrid(query, &unit(1), 10, Weights::default())
        .unwrap();
    let fewer_hit = hits.iter().find(|h| h.content == fewer).unwrap();
    assert_eq!(fewer_hit.found_by, FoundBy::Both);
}

/// Issue 49: the top-up searches only the question's words found in at most
/// `TOP_UP_MAX_CHUNKS` chunks, so its cost stays bounded in a big store: a word in more
/// chunks than that proposes none of them.
#[test]
fn the_top_up_leaves_out_words_found_in_too_many_chunks() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    let common = usize::try_from(TOP_UP_MAX_CHUNKS).unwrap() + 1;
    let mut chunks: Vec<NewChunk> = (0..common)
        .map(|i| chunk(&format!("wheel number {i}"), unit(i % DIMS)))
        .collect();
    chunks.push(chunk("Maria likes pottery.", unit(0)));
    store.insert(&chunks).unwrap();
    let query = "pottery wheel";
    let most = store
        .hybrid_text_side(query, 100, Period::default())
        .unwrap();
    assert!(most.is_empty(), "{most:?}");
    let side = text_side_for(&store, query, Fusion::DEFAULT, most, 100, |q| {
        store.search_text_in(q, 100, Period::default())
    })
    .unwrap();
    let side: Vec<&str> = side.iter().map(|h| h.content.as_str()).collect();
    assert_eq!(side, ["Maria likes pottery."]);
    // one chunk fewer with the word: it is searched by it too
    store.remove_source_prefix("").unwrap();
    chunks.remove(0);
    store.insert(&chunks).unwrap();
    let most = store
        .hybrid_text_side(query, 100, Period::default())
        .unwrap();
    let side = text_side_for(&store, query, Fusion::DEFAULT, most, 100, |q| {
        store.search_text_in(q, 100, Period::default())
    })
    .unwrap();
    assert_eq!(side.len(), 100);
}

#[test]
fn exact_duplicates_are_stored_once() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    let r = store
        .insert(&[chunk("same text", unit(0)), chunk("same text", unit(1))])
        .unwrap();
    assert_eq!((r.inserted, r.duplicates), (1, 1));
    let r = store.insert(&[chunk("same text", unit(2))]).unwrap();
    assert_eq!((r.inserted, r.duplicates), (0, 1));
    assert_eq!(store.len().unwrap(), 1);
    assert_eq!(store.search_text("same", 10).unwrap().len(), 1);
}

#[test]
fn a_bad_vector_stores_nothing() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    let err = store
        .insert(&[chunk("good", unit(0)), chunk("short", vec![1.0; 3])])
        .unwrap_err();
    assert!(matches!(
        err,
        StoreError::WrongDimensions {
            expected: 8,
            got: 3
        }
    ));
    assert!(matches!(
        store.insert(&[chunk("zero", vec![0.0; DIMS])]).unwrap_err(),
        StoreError::BadVector
    ));
    assert!(store.is_empty().unwrap());
}

#[test]
fn persists_across_reopen() {
    let (_d, path) = db();
    {
        let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
        sample(&mut store);
    }
    let store = MemoryStore::open(&path, DIMS, FP).unwrap();
    assert_eq!(store.len().unwrap(), 4);
    assert_eq!(store.search_text("borrow", 5).unwrap().len(), 1);
    assert!(
        store.search_vector(&unit(3), 1).unwrap()[0]
            .content
            .starts_with("Собаки")
    );
}

#[test]
fn another_model_is_a_fingerprint_mismatch() {
    let (_d, path) = db();
    {
        let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
        sample(&mut store);
    }
    let err = MemoryStore::open(&path, DIMS, "sha256:other").unwrap_err();
    assert!(err.is_fingerprint_mismatch());
    let msg = err.to_string();
    assert!(msg.contains(FP) && msg.contains("sha256:other"), "{msg}");
    // Other dimensions are a mismatch too.
    assert!(
        MemoryStore::open(&path, 4, FP)
            .unwrap_err()
            .is_fingerprint_mismatch()
    );
    // The old index is untouched.
    assert_eq!(
        MemoryStore::open(&path, DIMS, FP).unwrap().len().unwrap(),
        4
    );
}

#[test]
fn reembedding_replaces_every_vector() {
    let (_d, path) = db();
    {
        let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
        sample(&mut store);
    }
    let mut store = MemoryStore::open_reembed(&path, 4, "sha256:new").unwrap();
    let todo = store.chunks_without_vectors().unwrap();
    assert_eq!(todo.len(), 4);
    let vectors: Vec<(i64, Vec<f32>)> = todo
        .iter()
        .enumerate()
        .map(|(i, (id, _))| {
            let mut v = vec![0.0; 4];
            v[i] = 1.0;
            (*id, v)
        })
        .collect();
    store.set_vectors(&vectors).unwrap();
    assert!(store.chunks_without_vectors().unwrap().is_empty());
    let hit = &store.search_vector(&[0.0, 0.0, 0.0, 1.0], 1).unwrap()[0];
    assert_eq!(hit.content, todo[3].1);
    drop(store);
    assert!(MemoryStore::open(&path, 4, "sha256:new").is_ok());
    assert!(
        MemoryStore::open(&path, DIMS, FP)
            .unwrap_err()
            .is_fingerprint_mismatch()
    );
}

#[test]
fn hostile_fts_queries_never_error() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    let fixed = [
        "\"",
        "\"\"\"",
        "*",
        "a*",
        "AND",
        "OR",
        "NOT",
        "кошка AND",
        "NEAR(",
        "NEAR(a b, 2)",
        "-dog",
        "dog:",
        "content:кошка",
        "stems : x",
        "{content}: x",
        "(",
        ")",
        "^start",
        "a + b",
        "'; DROP TABLE chunks; --",
        "\u{0}",
        "кошка\" OR \"1",
        "",
        "   ",
    ];
    for q in fixed {
        store
            .search_text(q, 5)
            .unwrap_or_else(|e| panic!("{q:?}: {e}"));
    }
    // A deterministic fuzz: random strings over FTS5's special characters and keywords.
    let alphabet: Vec<&str> = vec![
        "\"",
        "*",
        "(",
        ")",
        ":",
        "-",
        "+",
        "^",
        "{",
        "}",
        ",",
        " ",
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "NEAR(",
        "кошка",
        "dog",
        "ё",
        "'",
        "\\",
        "\t",
        "\n",
        "0",
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..500 {
        let mut q = String::new();
        for _ in 0..(seed % 12) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            q.push_str(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        seed = seed.wrapping_add(1);
        store
            .search_text(&q, 5)
            .unwrap_or_else(|e| panic!("{q:?}: {e}"));
        let mut v = vec![0.5; DIMS];
        v[0] = 1.0;
        store
            .search_hybrid(&q, &v, 3, Weights::default())
            .unwrap_or_else(|e| panic!("{q:?}: {e}"));
    }
}

#[test]
fn remove_source_removes_text_stems_and_vectors() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    let mut other = chunk("A note from a file about cats.", unit(4));
    other.source = "cats.md".into();
    store.insert(&[other]).unwrap();
    assert_eq!(store.remove_source("cats.md").unwrap(), 1);
    assert_eq!(store.remove_source("cats.md").unwrap(), 0);
    assert_eq!(store.len().unwrap(), 4);
    assert!(store.search_text("file", 5).unwrap().is_empty());
    assert!(
        store
            .search_vector(&unit(4), 5)
            .unwrap()
            .iter()
            .all(|h| h.source == "test")
    );
}

#[test]
fn remove_source_prefix_is_literal_and_removes_every_section() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    let sourced = |content: &str, source: &str, i: usize| NewChunk {
        source: source.into(),
        ..chunk(content, unit(i))
    };
    store
        .insert(&[
            sourced(
                "Atomic writes go through a temporary file.",
                "tools/files.md#atomic-writes",
                4,
            ),
            sourced(
                "Paths are relative to the workspace.",
                "tools/files.md#paths",
                5,
            ),
            sourced(
                "A 100% match, with wildcards in the source.",
                "tools/f_les.md#x",
                6,
            ),
            sourced(
                "The files doc, but another file.",
                "tools/files.md.bak#x",
                7,
            ),
        ])
        .unwrap();
    // `_` and `%` are not wildcards: only the exact prefix matches.
    assert_eq!(store.remove_source_prefix("tools/f%").unwrap(), 0);
    assert_eq!(store.remove_source_prefix("tools/files.md#").unwrap(), 2);
    assert_eq!(store.len().unwrap(), 6);
    assert!(store.search_text("atomic", 5).unwrap().is_empty());
    assert!(
        store
            .search_vector(&unit(5), 8)
            .unwrap()
            .iter()
            .all(|h| !h.source.starts_with("tools/files.md#"))
    );
    assert_eq!(store.remove_source_prefix("tools/f_les.md#").unwrap(), 1);
}

#[test]
fn meta_values_persist() {
    let (_d, path) = db();
    {
        let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
        assert_eq!(store.meta("docs.hash").unwrap(), None);
        store.set_meta("docs.hash", "abc").unwrap();
    }
    let store = MemoryStore::open(&path, DIMS, FP).unwrap();
    assert_eq!(store.meta("docs.hash").unwrap().as_deref(), Some("abc"));
    assert_eq!(store.meta("dims").unwrap().as_deref(), Some("8"));
}

#[test]
fn vector_search_sees_this_stores_writes_after_its_first_search() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    // the first search loads the in-memory copy of the vectors
    assert!(store.search_vector(&unit(4), 1).unwrap()[0].content.len() > 1);
    store
        .insert(&[chunk("Axis four, added after the first search.", unit(4))])
        .unwrap();
    let hits = store.search_vector(&unit(4), 1).unwrap();
    assert_eq!(hits[0].content, "Axis four, added after the first search.");
    assert!((hits[0].score - 1.0).abs() < 1e-6);
    store.remove_source("test").unwrap();
    assert!(store.search_vector(&unit(4), 5).unwrap().is_empty());
}

#[test]
fn vector_search_sees_what_another_connection_wrote() {
    let (_d, path) = db();
    let mut a = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut a);
    assert_eq!(a.search_vector(&unit(5), 10).unwrap().len(), 4);
    // another process, say: its own connection
    let mut b = MemoryStore::open(&path, DIMS, FP).unwrap();
    b.insert(&[chunk("Written by the other connection.", unit(5))])
        .unwrap();
    let hits = a.search_vector(&unit(5), 1).unwrap();
    assert_eq!(hits[0].content, "Written by the other connection.");
    b.remove_source("test").unwrap();
    assert!(a.search_vector(&unit(5), 10).unwrap().is_empty());
}

#[test]
fn vector_search_of_a_big_store_matches_the_exact_scan() {
    // big enough for the in-memory copy to prefilter by bits (more than 16,384 vectors)
    const D: usize = 32;
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, D, FP).unwrap();
    let chunks: Vec<NewChunk> = (0..20_000u64)
        .map(|i| chunk(&format!("note {i}"), random_unit(i, D)))
        .collect();
    store.insert(&chunks).unwrap();
    let (mut same, mut total) = (0, 0);
    for i in 0..20u64 {
        // near a stored vector: that one first, then its neighbours
        let q: Vec<f32> = random_unit(i * 997, D)
            .iter()
            .zip(random_unit(1_000_000 + i, D))
            .map(|(a, b)| a + 0.2 * b)
            .collect();
        let approx = store.search_vector(&q, 10).unwrap();
        let exact = store.search_vector_exact(&q, 10).unwrap();
        assert_eq!(approx[0].id, exact[0].id, "query {i}");
        assert!((approx[0].score - exact[0].score).abs() < 1e-5);
        assert!(approx.windows(2).all(|w| w[0].score >= w[1].score));
        let ids: std::collections::HashSet<i64> = exact.iter().map(|h| h.id).collect();
        same += approx.iter().filter(|h| ids.contains(&h.id)).count();
        total += exact.len();
    }
    assert!(
        same * 100 >= total * 98,
        "{same} of {total} exact neighbours found"
    );
}

#[test]
fn a_database_without_the_int8_codes_gets_them_when_opened() {
    // made by a version that had only the float vectors
    let (_d, path) = db();
    {
        let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
        sample(&mut store);
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("DROP TABLE chunks_codes").unwrap();
    drop(conn);
    let store = MemoryStore::open(&path, DIMS, FP).unwrap();
    let hits = store.search_vector(&unit(3), 4).unwrap();
    assert_eq!(hits.len(), 4);
    assert!(hits[0].content.starts_with("Собаки"), "{hits:?}");
    assert!((hits[0].score - 1.0).abs() < 1e-6);
}

#[test]
fn codes_out_of_step_with_the_vectors_are_made_again() {
    let (_d, path) = db();
    {
        let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
        sample(&mut store);
    }
    // as if a binary that does not know `chunks_codes` had added and changed vectors
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DELETE FROM chunks_codes WHERE id > 2; UPDATE chunks_codes SET codes = x'00'",
    )
    .unwrap();
    drop(conn);
    let store = MemoryStore::open(&path, DIMS, FP).unwrap();
    for axis in 0..4 {
        let hits = store.search_vector(&unit(axis), 1).unwrap();
        assert!((hits[0].score - 1.0).abs() < 1e-6, "axis {axis}: {hits:?}");
    }
}

#[test]
fn set_vectors_after_the_first_search_moves_a_chunk() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    sample(&mut store);
    let cat = store.search_vector(&unit(0), 1).unwrap().remove(0);
    assert!(cat.content.starts_with("Кошка"));
    store.set_vectors(&[(cat.id, unit(6))]).unwrap();
    let hits = store.search_vector(&unit(6), 1).unwrap();
    assert_eq!(hits[0].id, cat.id);
    assert!((hits[0].score - 1.0).abs() < 1e-6);
    let old_place = store.search_vector(&unit(0), 5).unwrap();
    assert!(
        old_place.iter().all(|h| h.score.abs() < 1e-6),
        "{old_place:?}"
    );
}

#[test]
fn the_hybrid_text_side_keeps_chunks_with_more_than_half_of_the_words() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];
    // chunk i holds the first i words (0 to 6), plus filler
    let chunks: Vec<NewChunk> = (0..=words.len())
        .map(|i| chunk(&format!("note {i}: {} zulu", words[..i].join(" ")), unit(i)))
        .collect();
    store.insert(&chunks).unwrap();
    // how many of the words each hit holds, sorted
    let holds = |hits: Vec<Hit>| -> Vec<usize> {
        let mut out: Vec<usize> = hits
            .iter()
            .map(|h| words.iter().filter(|w| h.content.contains(*w)).count())
            .collect();
        out.sort_unstable();
        out
    };
    // six words (the FTS5 expression): chunks with 4, 5 or 6 of them, the most first
    let six = store
        .hybrid_text_side(
            "alpha bravo charlie delta echo foxtrot",
            10,
            Period::default(),
        )
        .unwrap();
    assert_eq!(
        words.iter().filter(|w| six[0].content.contains(*w)).count(),
        6
    );
    assert_eq!(holds(six), [4, 5, 6]);
    // seven words (the filter on the plain OR's best): the same rule
    let seven = store
        .hybrid_text_side(
            "alpha bravo charlie delta echo foxtrot zulu",
            10,
            Period::default(),
        )
        .unwrap();
    assert_eq!(holds(seven), [3, 4, 5, 6]);
}

#[test]
fn a_period_limits_every_side_of_the_search() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    // May 2023, June 2023, July 2023 (UTC), all about a trip
    store
        .insert(&[
            at("Trip to Lisbon planned", unit(0), 1_683_000_000),
            at("Trip to Lisbon booked", unit(1), 1_686_000_000),
            at("Trip to Lisbon cancelled", unit(2), 1_689_000_000),
        ])
        .unwrap();
    let june = Period {
        from: Some(1_685_577_600), // 2023-06-01
        to: Some(1_688_169_600),   // 2023-07-01
    };
    let contents = |hits: Vec<Hit>| hits.into_iter().map(|h| h.content).collect::<Vec<_>>();
    assert_eq!(
        contents(store.search_text_in("trip lisbon", 10, june).unwrap()),
        ["Trip to Lisbon booked"]
    );
    // the nearest vector is May's, but only June's is in the period
    assert_eq!(
        contents(store.search_vector_in(&unit(0), 10, june).unwrap()),
        ["Trip to Lisbon booked"]
    );
    assert_eq!(
        contents(store.hybrid_text_side("trip lisbon", 10, june).unwrap()),
        ["Trip to Lisbon booked"]
    );
    let since_june = Period {
        from: june.from,
        to: None,
    };
    assert_eq!(
        store.search_text_in("trip", 10, since_june).unwrap().len(),
        2
    );
    assert_eq!(store.search_text("trip", 10).unwrap().len(), 3);
    let empty = Period {
        from: Some(0),
        to: Some(1),
    };
    assert!(
        store
            .search_vector_in(&unit(0), 10, empty)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_context_is_embedded_again_but_neither_shown_nor_searched_by_words() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    let with_context = |content: &str, context: &str, v| NewChunk {
        context: Some(context.to_owned()),
        ..chunk(content, v)
    };
    let r = store
        .insert(&[
            with_context(
                "Yes, the blue one.",
                "Sam: Which jacket did you buy?",
                unit(0),
            ),
            // the same reply to another question is another memory
            with_context(
                "Yes, the blue one.",
                "Sam: Which car did you rent?",
                unit(1),
            ),
            with_context(
                "Yes, the blue one.",
                "Sam: Which car did you rent?",
                unit(1),
            ),
        ])
        .unwrap();
    assert_eq!((r.inserted, r.duplicates), (2, 1));
    assert!(store.search_text("jacket", 10).unwrap().is_empty());
    let hits = store.search_vector(&unit(0), 1).unwrap();
    assert_eq!(hits[0].content, "Yes, the blue one.");
    drop(store);
    // another model: the text re-embedded is the context and the content
    let store = MemoryStore::open_reembed(&path, DIMS, "sha256:other").unwrap();
    let mut texts: Vec<String> = store
        .chunks_without_vectors()
        .unwrap()
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    texts.sort();
    assert_eq!(
        texts,
        [
            "Sam: Which car did you rent?\nYes, the blue one.",
            "Sam: Which jacket did you buy?\nYes, the blue one."
        ]
    );
}

#[test]
fn a_database_made_before_contexts_gets_the_column_and_keeps_its_chunks() {
    let (_d, path) = db();
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE chunks (
                 id INTEGER PRIMARY KEY, content TEXT NOT NULL, source TEXT NOT NULL,
                 created_at INTEGER NOT NULL, content_hash TEXT NOT NULL UNIQUE
             );
             INSERT INTO chunks VALUES (1, 'old note', 'manual', 1700000000, 'h');",
        )
        .unwrap();
    }
    let mut store = MemoryStore::open_reembed(&path, DIMS, FP).unwrap();
    assert_eq!(
        store.chunks_without_vectors().unwrap(),
        [(1, "old note".to_owned())]
    );
    store.set_vectors(&[(1, unit(0))]).unwrap();
    store
        .insert(&[NewChunk {
            context: Some("before".into()),
            ..chunk("new note", unit(1))
        }])
        .unwrap();
    assert_eq!(store.len().unwrap(), 2);
}

#[test]
fn a_period_keeps_from_and_stops_just_before_to() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    store
        .insert(&[
            at("edge one", unit(0), 999),
            at("edge two", unit(1), 1000),
            at("edge three", unit(2), 1999),
            at("edge four", unit(3), 2000),
        ])
        .unwrap();
    let p = Period {
        from: Some(1000),
        to: Some(2000),
    };
    let mut got: Vec<String> = store
        .search_text_in("edge", 10, p)
        .unwrap()
        .into_iter()
        .map(|h| h.content)
        .collect();
    got.sort();
    assert_eq!(got, ["edge three", "edge two"]);
    assert_eq!(store.search_vector_in(&unit(0), 10, p).unwrap().len(), 2);
    assert!(p.contains(1000) && p.contains(1999) && !p.contains(999) && !p.contains(2000));
}

#[test]
fn the_hash_of_a_text_without_context_is_its_plain_sha256_as_before() {
    // what databases made before contexts stored: the same text still dedupes
    assert_eq!(
        content_hash("abc", None),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(content_hash("abc", Some("")), content_hash("abc", None));
    assert_ne!(
        content_hash("a\0b", Some("c")),
        content_hash("a", Some("b\0c"))
    );
}

#[test]
fn a_time_past_year_9999_is_found_with_an_empty_date_not_an_error() {
    let (_d, path) = db();
    let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
    store
        .insert(&[at("far future", unit(0), 1_709_406_300_000_000)])
        .unwrap();
    let hits = store.search_text("future", 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].date, "");
}

#[test]
fn vectors_pending_until_finished_and_again_after_an_unfinished_reembedding() {
    let (_d, path) = db();
    {
        let mut store = MemoryStore::open(&path, DIMS, FP).unwrap();
        // a store that never said: maybe some are missing
        assert!(store.vectors_pending().unwrap());
        store.finish_vectors(&[]).unwrap();
        assert!(!store.vectors_pending().unwrap());
        sample(&mut store);
        assert!(!store.vectors_pending().unwrap());
    }
    assert!(
        !MemoryStore::open(&path, DIMS, FP)
            .unwrap()
            .vectors_pending()
            .unwrap()
    );
    // another model: the vectors are dropped and the flag with them, in one transaction
    let left = {
        let mut store = MemoryStore::open_reembed(&path, 4, "sha256:new").unwrap();
        assert!(store.vectors_pending().unwrap());
        let todo = store.chunks_without_vectors().unwrap();
        assert!(todo.len() >= 2, "{todo:?}");
        // some done, then the process dies
        store
            .set_vectors(&[(todo[0].0, vec![1.0, 0.0, 0.0, 0.0])])
            .unwrap();
        todo.len() - 1
    };
    let mut store = MemoryStore::open(&path, 4, "sha256:new").unwrap();
    assert!(store.vectors_pending().unwrap());
    let todo = store.chunks_without_vectors().unwrap();
    assert_eq!(todo.len(), left);
    let vectors: Vec<(i64, Vec<f32>)> = todo
        .iter()
        .map(|(id, _)| (*id, vec![0.0, 1.0, 0.0, 0.0]))
        .collect();
    store.finish_vectors(&vectors).unwrap();
    assert!(!store.vectors_pending().unwrap());
    assert!(store.chunks_without_vectors().unwrap().is_empty());
    drop(store);
    assert!(
        !MemoryStore::open(&path, 4, "sha256:new")
            .unwrap()
            .vectors_pending()
            .unwrap()
    );
}
