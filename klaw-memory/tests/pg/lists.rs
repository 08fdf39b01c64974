//! The text side's impact lists on PostgreSQL (issue 45): the bounded ranking, proven from
//! the lists of the common words, gives the answer of ranking every match (the same
//! chunks, scores and order) as chunks enter and leave the lists and `avgdl` moves; a
//! memory made without the lists' tables opens and gets them, also with two engines at
//! once; two engines making one word's list at once make it once; a list is built in the
//! background, while a search answers from the postings and saves and removals go on
//! (none of them waits for it); a failed build is tried again later, not at once.

use klaw_memory::bench_support::{ListSettings, NewChunk, PgStore};
use klaw_memory::{Hit, Period};

use super::{Rng, connect, server, vector_db};

/// Small lists so that a test corpus has them: a word of more than 60 chunks gets its
/// best 25.
const SETTINGS: ListSettings = ListSettings {
    threshold: 60,
    size: 25,
    pause: std::time::Duration::ZERO,
};

const DIMS: usize = 4;

/// The made-up words of the corpus, commonest first (their own stems).
fn vocabulary() -> Vec<String> {
    (0..40).map(|i| format!("zork{i}x")).collect()
}

/// `n` chunks of `len` words (a range) drawn Zipf-like from the vocabulary, one chunk in
/// 40 with a rare word `uniq<i>`, numbered from `first`, in source `source`.
fn chunks(
    rng: &mut Rng,
    first: usize,
    n: usize,
    len: std::ops::Range<usize>,
    source: &str,
) -> Vec<NewChunk> {
    let words = vocabulary();
    (first..first + n)
        .map(|i| {
            let count = len.start + (rng.next() as usize) % (len.end - len.start);
            let mut text: Vec<String> = (0..count)
                .map(|_| {
                    let u = rng.unit();
                    words[((u * u * u) * words.len() as f32) as usize % words.len()].clone()
                })
                .collect();
            if i % 40 == 0 {
                text.push(format!("uniq{}", i / 40));
            }
            NewChunk {
                content: format!("{} n{i}", text.join(" ")),
                source: source.to_owned(),
                created_at: Some(1_700_000_000 + i as i64),
                context: None,
                vector: (0..DIMS).map(|d| 1.0 + (i + d) as f32 % 7.0).collect(),
                more_vectors: Vec::new(),
            }
        })
        .collect()
}

fn same(a: &[Hit], b: &[Hit]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.id == y.id && x.score.to_bits() == y.score.to_bits())
}

/// The queries checked: one common word, several, common and rare, middling words.
const QUERIES: [&str; 10] = [
    "zork0x",
    "zork1x",
    "zork2x zork0x",
    "zork0x zork1x zork3x",
    "zork0x uniq3",
    "zork1x zork4x uniq7",
    "zork12x zork0x",
    "zork20x zork2x",
    "zork30x",
    "zork0x zork1x zork2x zork3x zork5x",
];

/// Every query, at several `k`, in both modes (the text search and hybrid's text side):
/// the bounded answer is the exhaustive one. Returns how many the lists proved.
fn check(store: &PgStore, stage: &str) -> u64 {
    let (proven, _) = store.list_stats();
    for q in QUERIES {
        for k in [1, 3, 10, 30] {
            let bounded = store.search_text_in(q, k, Period::default()).unwrap();
            let every = store.search_text_exhaustive(q, k, false).unwrap();
            assert!(same(&bounded, &every), "{stage}: text {q:?} k {k}");
            let side = store.hybrid_text_side(q, k, Period::default()).unwrap();
            let every_side = store.search_text_exhaustive(q, k, true).unwrap();
            assert!(same(&side, &every_side), "{stage}: hybrid side {q:?} k {k}");
        }
        // a period keeps some of the lists' chunks: still the same answer
        let period = Period {
            from: Some(1_700_000_100),
            to: Some(1_700_000_400),
        };
        let bounded = store.search_text_in(q, 10, period).unwrap();
        let mut every = store.search_text_exhaustive(q, 4096, false).unwrap();
        every.retain(|h| h.created_at >= 1_700_000_100 && h.created_at < 1_700_000_400);
        every.truncate(10);
        assert!(same(&bounded, &every), "{stage}: period {q:?}");
    }
    store.list_stats().0 - proven
}

fn lists_in(server: &server::Postgres, url: &str) -> String {
    server.psql_url(
        url,
        "SELECT (SELECT count(*) FROM klaw_memory_lists) || '|' || \
         (SELECT count(*) FROM klaw_memory_impacts)",
    )
}

#[test]
fn the_lists_prove_the_answer_of_every_match() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let url = vector_db(&server);
    let pg = connect(&url);
    let (mut store, _) = PgStore::open_models(pg.memory.clone(), &[(DIMS, "lists")]).unwrap();
    store.set_lists(SETTINGS);
    let mut rng = Rng(0x1157_0000_0000_0045);
    for b in 0..8 {
        store
            .insert(&chunks(&mut rng, b * 100, 100, 5..30, "base"))
            .unwrap();
    }
    // the lists are asked for by the first searches with the common words, which rank
    // the postings meanwhile (the same answers), and built in the background
    assert_eq!(lists_in(&server, &url), "0|0");
    check(&store, "first, the lists being built");
    store.wait_for_lists();
    assert_eq!(store.list_builds().1, 0, "{:?}", store.list_builds());
    let proven = check(&store, "the lists built");
    assert!(
        proven > 0,
        "the lists proved nothing: {:?}",
        store.list_stats()
    );
    let made = lists_in(&server, &url);
    assert_ne!(made, "0|0");
    // one common word alone is proven from its list
    let before = store.list_stats();
    store
        .search_text_in("zork0x", 10, Period::default())
        .unwrap();
    assert_eq!(
        store.list_stats().0,
        before.0 + 1,
        "{:?}",
        store.list_stats()
    );
    eprintln!(
        "lists|entries {made}; proven, fell back: {:?}",
        store.list_stats()
    );

    // saves whose part is above theta join the lists: short chunks full of the word
    let strong: Vec<NewChunk> = (0..6)
        .map(|i| NewChunk {
            content: format!("{} zork1x s{i}", ["zork0x"; 40].join(" ")),
            source: "strong".into(),
            created_at: Some(1_700_000_200 + i),
            context: None,
            vector: vec![1.0; DIMS],
            more_vectors: Vec::new(),
        })
        .collect();
    let entries = |store: &PgStore| -> usize {
        let _ = store;
        server
            .psql_url(&url, "SELECT count(*) FROM klaw_memory_impacts")
            .parse()
            .unwrap()
    };
    let n0 = entries(&store);
    store.insert(&strong).unwrap();
    assert!(entries(&store) > n0, "the strong chunks joined no list");
    let top = store
        .search_text_in("zork0x", 1, Period::default())
        .unwrap();
    assert!(top[0].content.starts_with("zork0x zork0x"), "{top:?}");
    let proven = check(&store, "after saves that enter the lists");
    assert!(
        proven > 0,
        "after saves that enter the lists: nothing proven"
    );

    // removed chunks leave the lists (theta stays a bound)
    let n1 = entries(&store);
    assert_eq!(store.remove_source("strong").unwrap(), 6);
    assert!(entries(&store) < n1);
    let proven = check(&store, "after removing listed chunks");
    assert!(proven > 0, "after removing listed chunks: nothing proven");
    // and more: a quarter of the corpus
    store.remove_source_prefix("bas").unwrap();
    for b in 0..2 {
        store
            .insert(&chunks(&mut rng, 1000 + b * 100, 100, 5..30, "base2"))
            .unwrap();
    }
    let proven = check(&store, "after removing most of the lists' chunks");
    assert!(
        proven > 0,
        "after removing most of the lists' chunks: nothing proven"
    );

    // avgdl moves up (long chunks), then down (short ones), the lists made before
    for b in 0..3 {
        store
            .insert(&chunks(&mut rng, 2000 + b * 100, 100, 60..90, "long"))
            .unwrap();
    }
    let up = check(&store, "after avgdl grew");
    for b in 0..6 {
        store
            .insert(&chunks(&mut rng, 3000 + b * 100, 100, 2..5, "short"))
            .unwrap();
    }
    let down = check(&store, "after avgdl shrank");
    eprintln!("proven after avgdl grew {up}, after it shrank {down}");
    assert!(up > 0 && down > 0, "{up} {down}");

    // bad input as before: no words, k 0
    assert!(
        store
            .search_text_in("  ", 10, Period::default())
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .search_text_in("...", 10, Period::default())
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .search_text_in("zork0x", 0, Period::default())
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .hybrid_text_side("", 10, Period::default())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_memory_made_without_the_lists_gets_them_when_two_engines_open_it() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let url = vector_db(&server);
    {
        let pg = connect(&url);
        let (mut store, _) = PgStore::open_models(pg.memory.clone(), &[(DIMS, "lists")]).unwrap();
        let mut rng = Rng(0x2157_0000_0000_0045);
        for b in 0..3 {
            store
                .insert(&chunks(&mut rng, b * 100, 100, 5..30, "base"))
                .unwrap();
        }
    }
    // as the previous version made it: no lists' tables
    server.psql_url(&url, "DROP TABLE klaw_memory_lists, klaw_memory_impacts");
    let engines: Vec<_> = (0..2).map(|_| connect(&url)).collect();
    let stores: Vec<PgStore> = std::thread::scope(|s| {
        let handles: Vec<_> = engines
            .iter()
            .map(|pg| {
                s.spawn(move || {
                    PgStore::open_models(pg.memory.clone(), &[(DIMS, "lists")])
                        .unwrap()
                        .0
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(lists_in(&server, &url), "0|0");
    // both search one common word at once (ranking the postings): its list is made once
    let mut stores = stores;
    for s in &mut stores {
        s.set_lists(SETTINGS);
    }
    let answers: Vec<Vec<Hit>> = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter()
            .map(|st| s.spawn(move || st.search_text_in("zork0x", 10, Period::default()).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let every = stores[0]
        .search_text_exhaustive("zork0x", 10, false)
        .unwrap();
    assert!(answers.iter().all(|a| same(a, &every)));
    for s in &stores {
        s.wait_for_lists();
    }
    assert_eq!(lists_in(&server, &url), "1|25");
    // opened again (idempotent), it is kept and proves the next search
    let pg = connect(&url);
    let (mut again, _) = PgStore::open_models(pg.memory.clone(), &[(DIMS, "lists")]).unwrap();
    again.set_lists(SETTINGS);
    assert_eq!(lists_in(&server, &url), "1|25");
    let got = again
        .search_text_in("zork0x", 10, Period::default())
        .unwrap();
    assert!(same(&got, &every));
    assert_eq!(again.list_stats(), (1, 0));
}

/// Polls `sql` until it gives `want` (10 s at most).
fn wait_for(server: &server::Postgres, url: &str, sql: &str, want: &str) {
    let t = std::time::Instant::now();
    while server.psql_url(url, sql) != want {
        assert!(t.elapsed().as_secs() < 10, "{sql} never gave {want}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn strong(n: i64, source: &str, at: i64) -> Vec<NewChunk> {
    (0..n)
        .map(|i| NewChunk {
            content: format!("{} {source}{i}", ["zork0x"; 40].join(" ")),
            source: source.into(),
            created_at: Some(at + i),
            context: None,
            vector: vec![1.0; DIMS],
            more_vectors: Vec::new(),
        })
        .collect()
}

#[test]
fn a_list_is_built_in_the_background_while_chunks_are_saved_removed_and_searched() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let url = vector_db(&server);
    let (pa, pb) = (connect(&url), connect(&url));
    let (mut a, _) = PgStore::open_models(pa.memory.clone(), &[(DIMS, "lists")]).unwrap();
    let (mut b, _) = PgStore::open_models(pb.memory.clone(), &[(DIMS, "lists")]).unwrap();
    // each build pauses between its snapshot and its install
    let pause = std::time::Duration::from_secs(5);
    let slow = ListSettings { pause, ..SETTINGS };
    a.set_lists(slow);
    b.set_lists(slow);
    let mut rng = Rng(0x3157_0000_0000_0045);
    for n in 0..8 {
        a.insert(&chunks(&mut rng, n * 100, 100, 5..30, "base"))
            .unwrap();
    }
    // chunks at the top of the word's list, in the build's snapshot, removed during it
    a.insert(&strong(3, "early", 1_700_000_300)).unwrap();
    let every = a.search_text_exhaustive("zork0x", 10, false).unwrap();
    assert!(every[0].content.contains("early"), "{every:?}");

    // the first search does not wait for the build it asks for: the postings' answer
    let t = std::time::Instant::now();
    let first = a.search_text_in("zork0x", 10, Period::default()).unwrap();
    assert!(t.elapsed() < pause, "{:?}", t.elapsed());
    assert!(same(&first, &every));
    assert_eq!(a.list_stats(), (0, 1));
    let marked = "SELECT count(*) FROM klaw_memory_list_builds";
    wait_for(&server, &url, marked, "1");
    // (past the snapshot, a statement on 800 chunks)
    std::thread::sleep(std::time::Duration::from_millis(500));

    // saves and removals meanwhile do not wait for the build either
    let t = std::time::Instant::now();
    a.insert(&strong(4, "late", 1_700_000_350)).unwrap();
    // a weak chunk (one "zork0x" in 80 words): put aside by the save, dropped by the install
    let weak = format!("{} zork0x weak", ["zork9x"; 80].join(" "));
    a.insert(&[NewChunk {
        content: weak,
        source: "weak".into(),
        created_at: Some(1_700_000_360),
        context: None,
        vector: vec![1.0; DIMS],
        more_vectors: Vec::new(),
    }])
    .unwrap();
    assert_eq!(b.remove_source("early").unwrap(), 3);
    // a search of another engine meanwhile: the postings' answer, and its own ask for
    // the list finds it being built (the advisory lock) and does not wait
    let every = a.search_text_exhaustive("zork0x", 10, false).unwrap();
    assert!(every[0].content.contains("late"), "{every:?}");
    let during = b.search_text_in("zork0x", 10, Period::default()).unwrap();
    assert!(same(&during, &every));
    b.wait_for_lists();
    assert!(
        t.elapsed() < pause,
        "waited for the build: {:?}",
        t.elapsed()
    );
    assert_eq!(b.list_builds(), (1, 0));
    assert_eq!(
        lists_in(&server, &url),
        "0|5",
        "the saves' chunks are put aside (the late and the weak)"
    );

    // the install: the snapshot's best (less the removed ones) and the late chunks
    a.wait_for_lists();
    assert_eq!(a.list_builds(), (1, 0));
    assert_eq!(server.psql_url(&url, marked), "0");
    assert_eq!(
        server.psql_url(&url, "SELECT count(*) FROM klaw_memory_lists"),
        "1"
    );
    let listed = |source: &str| {
        server.psql_url(
            &url,
            &format!(
                "SELECT count(*) FROM klaw_memory_impacts i JOIN klaw_memory_chunks m
                 ON m.id = i.id WHERE m.source = '{source}'"
            ),
        )
    };
    assert_eq!(listed("late"), "4");
    assert_eq!(listed("weak"), "0");
    assert_eq!(
        server.psql_url(
            &url,
            "SELECT count(*) FROM klaw_memory_impacts i
             WHERE NOT EXISTS (SELECT 1 FROM klaw_memory_chunks m WHERE m.id = i.id)"
        ),
        "0",
        "removed chunks left the list"
    );
    let proven = a.search_text_in("zork0x", 10, Period::default()).unwrap();
    assert!(same(&proven, &every));
    assert_eq!(a.list_stats(), (1, 1));
    a.set_lists(SETTINGS);
    assert!(check(&a, "after a build with saves and removals meanwhile") > 0);
    a.wait_for_lists();

    // the other lists built eagerly, by one call: then every search is proven or not
    // without asking for any
    b.set_lists(SETTINGS);
    let made = b.make_lists().unwrap();
    assert_eq!(b.make_lists().unwrap(), 0);
    let lists: usize = server
        .psql_url(&url, "SELECT count(*) FROM klaw_memory_lists")
        .parse()
        .unwrap();
    eprintln!("made eagerly {made}, lists {lists}");
    let asked = b.list_builds().0;
    check(&b, "the lists made eagerly");
    b.wait_for_lists();
    assert_eq!(b.list_builds().0, asked);
}

#[test]
fn a_failed_build_is_logged_and_tried_again_later_not_at_once() {
    let Some(server) = server::Postgres::start() else {
        return;
    };
    let url = vector_db(&server);
    let pg = connect(&url);
    let (mut store, _) = PgStore::open_models(pg.memory.clone(), &[(DIMS, "lists")]).unwrap();
    store.set_lists(SETTINGS);
    let mut rng = Rng(0x4157_0000_0000_0045);
    for n in 0..3 {
        store
            .insert(&chunks(&mut rng, n * 100, 100, 5..30, "base"))
            .unwrap();
    }
    // a build fails (its table gone); the searches answer from the postings meanwhile
    server.psql_url(&url, "DROP TABLE klaw_memory_list_builds");
    let every = store.search_text_exhaustive("zork0x", 10, false).unwrap();
    for _ in 0..20 {
        let got = store
            .search_text_in("zork0x", 10, Period::default())
            .unwrap();
        assert!(same(&got, &every));
        store.wait_for_lists();
    }
    // tried once, not again by the next 19 searches (backing off 5 s)
    assert_eq!(store.list_builds(), (1, 1));
    assert_eq!(lists_in(&server, &url), "0|0");
    // the table back (the memory opened again), a search after the wait builds it
    drop(PgStore::open_models(pg.memory.clone(), &[(DIMS, "lists")]).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(5100));
    store
        .search_text_in("zork0x", 10, Period::default())
        .unwrap();
    store.wait_for_lists();
    assert_eq!(store.list_builds(), (2, 1));
    assert_eq!(lists_in(&server, &url), "1|25");
}
