//! The memory tools, called by name through the registry as the engine calls them, with
//! the real model (`make setup` installs it; without it these tests fail with its hint).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use klaw_core::ToolError;
use klaw_core::testing::Kit;
use klaw_memory::MemoryConfig;
use serde_json::{Value, json};

fn kit() -> Kit {
    Kit::new().expect("kit")
}

fn invalid(e: &ToolError, pointer: &str, says: &str) {
    assert!(e.is_invalid_arguments(), "{}", e.to_model_text());
    assert_eq!(e.pointer(), Some(pointer), "{}", e.to_model_text());
    assert!(e.message().contains(says), "{}", e.message());
}

#[tokio::test]
async fn bad_arguments_are_refused_before_the_model_is_loaded() {
    let kit = kit();
    let e = kit
        .call_err("memory_search", json!({"query": "  \n "}))
        .await;
    invalid(&e, "/query", "/query: empty: say what to look for");
    let e = kit
        .call_err("memory_search", json!({"query": "tea", "topK": 0}))
        .await;
    // The schema's bounds (1 to 50) refuse it before the tool's own check would.
    invalid(&e, "/topK", "expected a number ≥ 1, got 0");
    let e = kit
        .call_err("memory_search", json!({"query": "tea", "topK": 51}))
        .await;
    invalid(&e, "/topK", "expected a number ≤ 50, got 51");
    let e = kit
        .call_err("memory_search", json!({"query": "tea", "topK": -1}))
        .await;
    assert!(e.is_invalid_arguments(), "{}", e.to_model_text());
    let e = kit
        .call_err("memory_search", json!({"query": "tea", "mode": "fuzzy"}))
        .await;
    assert!(e.is_invalid_arguments(), "{}", e.to_model_text());
    assert_eq!(e.pointer(), Some("/mode"));
    let e = kit
        .call_err("memory_search", json!({"query": "x".repeat(2001)}))
        .await;
    invalid(&e, "/query", "longer than 2000");
    let e = kit.call_err("memory_save", json!({"content": ""})).await;
    invalid(&e, "/content", "empty");
    let e = kit
        .call_err("memory_save", json!({"content": " \t\n"}))
        .await;
    invalid(&e, "/content", "empty");
    let e = kit
        .call_err("memory_save", json!({"content": "a".repeat(65_537)}))
        .await;
    invalid(&e, "/content", "more than the 65536 bytes");
    let e = kit
        .call_err("memory_save", json!({"content": "tea", "source": " "}))
        .await;
    invalid(&e, "/source", "1 to 200 characters");
    let e = kit.call_err("memory_save", json!({})).await;
    invalid(&e, "/content", "");
    let e = kit
        .call_err(
            "memory_core_update",
            json!({"section": "world", "key": "k", "value": "v"}),
        )
        .await;
    assert_eq!(e.pointer(), Some("/section"), "{}", e.to_model_text());
    let e = kit
        .call_err(
            "memory_core_update",
            json!({"section": "user", "key": " ", "value": "v"}),
        )
        .await;
    invalid(&e, "/key", "/key: empty");
    let e = kit
        .call_err(
            "memory_core_update",
            json!({"section": "user", "key": "k", "value": ""}),
        )
        .await;
    invalid(&e, "/value", "memory_core_delete");
    let e = kit
        .call_err(
            "memory_search",
            json!({"query": "tea", "from": "last week"}),
        )
        .await;
    invalid(&e, "/from", "use YYYY-MM-DD");
    let e = kit
        .call_err(
            "memory_search",
            json!({"query": "tea", "from": "2024-05-02", "to": "2024-05-01"}),
        )
        .await;
    invalid(&e, "/to", "before `from`");
    // Nothing reached the data directory.
    assert!(!kit.data_dir().join("memory.sqlite").exists());
}

#[tokio::test]
async fn save_then_search_in_every_mode_and_across_languages() {
    let kit = kit();
    let saved = kit
        .call_ok(
            "memory_save",
            json!({"content": "Пользователь предпочитает зелёный чай без сахара."}),
        )
        .await;
    assert_eq!(saved["inserted"], 1);
    assert_eq!(saved["alreadyStored"], false);
    assert_eq!(saved["message"], "Saved (1 chunk).");
    let again = kit
        .call_ok(
            "memory_save",
            json!({"content": "Пользователь предпочитает зелёный чай без сахара."}),
        )
        .await;
    assert_eq!(again["alreadyStored"], true, "{again}");
    assert_eq!(
        (again["inserted"].clone(), again["duplicates"].clone()),
        (json!(0), json!(1))
    );
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .starts_with("Already stored")
    );
    kit.call_ok("memory_save",
        json!({"content": "The staging server is srv-db-07 in Frankfurt.", "source": "notes/servers.md"}),
    )
    .await;

    // Cross-language, by meaning: a Russian question finds the English note.
    let found = kit
        .call_ok(
            "memory_search",
            json!({"query": "какой сервер у тестовой среды?", "mode": "vector", "topK": 1}),
        )
        .await;
    assert_eq!(found["mode"], "vector");
    assert_eq!(found["count"], 1);
    let hit = &found["results"][0];
    assert!(
        hit["content"].as_str().unwrap().contains("srv-db-07"),
        "{found}"
    );
    assert_eq!(hit["source"], "notes/servers.md");
    assert_eq!(hit["foundBy"], "vector");
    let today = hit["date"].as_str().unwrap();
    assert_eq!(today.len(), 10, "{today}");
    assert!(hit["score"].as_f64().unwrap() > 0.0);

    // By words only.
    let found = kit
        .call_ok(
            "memory_search",
            json!({"query": "srv-db-07", "mode": "text"}),
        )
        .await;
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(found["results"][0]["foundBy"], "text");

    // Hybrid (the default): the source defaults to manual.
    let found = kit
        .call_ok("memory_search", json!({"query": "зелёный чай"}))
        .await;
    assert_eq!(found["mode"], "hybrid");
    let first = &found["results"][0];
    assert!(
        first["content"].as_str().unwrap().contains("чай"),
        "{found}"
    );
    assert_eq!(first["source"], "manual");
    assert_eq!(first["foundBy"], "both");
    assert!(found["count"].as_u64().unwrap() <= 10);

    // A period: everything was saved today, so a day long ago finds nothing, and from
    // that day on finds it all.
    let found = kit
        .call_ok(
            "memory_search",
            json!({"query": "зелёный чай", "from": "2001-01-01", "to": "2001-01-01"}),
        )
        .await;
    assert_eq!(found["count"], 0, "{found}");
    let found = kit
        .call_ok(
            "memory_search",
            json!({"query": "зелёный чай", "from": "2001-01-01"}),
        )
        .await;
    assert!(found["count"].as_u64().unwrap() >= 1, "{found}");
}

#[tokio::test]
async fn memory_without_the_model_is_unavailable_and_names_make_setup() {
    let missing = tempfile::tempdir().unwrap();
    let kit = kit().with_context(|b| {
        b.service(MemoryConfig {
            model_dir: Some(missing.path().join("no-model")),
            runtime_library: Some(missing.path().join("libonnxruntime.so")),
            ..MemoryConfig::default()
        })
    });
    for (tool, args) in [
        ("memory_search", json!({"query": "tea"})),
        ("memory_save", json!({"content": "tea"})),
    ] {
        let e = kit.call_err(tool, args).await;
        assert_eq!(e.kind().code(), "unavailable", "{}", e.to_model_text());
        assert!(e.message().contains("make setup"), "{}", e.message());
    }
}

#[tokio::test]
async fn core_memory_get_update_delete() {
    let kit = kit();
    let empty = kit.call_ok("memory_core_get", json!({})).await;
    assert_eq!(empty["user"], json!({}));
    assert_eq!(empty["agent"], json!({}));
    assert_eq!(empty["maxBytes"], 8192);
    let r = kit
        .call_ok(
            "memory_core_update",
            json!({"section": "user", "key": " name ", "value": "Анна"}),
        )
        .await;
    assert_eq!(r["key"], "name");
    assert_eq!(r["previous"], Value::Null);
    let r = kit
        .call_ok(
            "memory_core_update",
            json!({"section": "user", "key": "name", "value": "Анна К."}),
        )
        .await;
    assert_eq!(r["previous"], "Анна");
    kit.call_ok(
        "memory_core_update",
        json!({"section": "agent", "key": "tone", "value": "brief"}),
    )
    .await;
    let got = kit.call_ok("memory_core_get", json!({})).await;
    assert_eq!(got["user"], json!({"name": "Анна К."}));
    assert_eq!(got["agent"], json!({"tone": "brief"}));

    let e = kit
        .call_err(
            "memory_core_delete",
            json!({"section": "user", "key": "timezone"}),
        )
        .await;
    assert!(e.is_not_found(), "{}", e.to_model_text());
    assert!(e.message().contains("`timezone`"), "{}", e.message());
    assert!(
        e.message().contains("its keys are: name"),
        "{}",
        e.message()
    );

    let d = kit
        .call_ok(
            "memory_core_delete",
            json!({"section": "user", "key": "name"}),
        )
        .await;
    assert_eq!(d["value"], "Анна К.");
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(kit.data_dir().join("core_memory.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(file, json!({"user": {}, "agent": {"tone": "brief"}}));
}

#[tokio::test]
async fn a_corrupt_core_memory_file_is_reported_and_kept() {
    let kit = kit();
    let path = kit.data_dir().join("core_memory.json");
    std::fs::write(&path, "{\"user\": {\"name\": \"Anna\"").unwrap();
    let e = kit.call_err("memory_core_get", json!({})).await;
    assert!(
        e.message().contains("core memory is corrupt"),
        "{}",
        e.message()
    );
    let e = kit
        .call_err(
            "memory_core_update",
            json!({"section": "user", "key": "tea", "value": "green"}),
        )
        .await;
    assert!(e.message().contains("left untouched"), "{}", e.message());
    let e = kit
        .call_err(
            "memory_core_delete",
            json!({"section": "user", "key": "name"}),
        )
        .await;
    assert!(e.message().contains("corrupt"), "{}", e.message());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"user\": {\"name\": \"Anna\""
    );
}

#[tokio::test]
async fn warming_creates_nothing_and_then_serves_the_same_index() {
    use klaw_memory::Memory;
    let kit = kit();
    let ctx = kit.context().clone();
    let memory = ctx.shared_state::<Memory>();
    // No memory yet: nothing to warm, nothing created, the model not loaded.
    assert!(!memory.warm(&ctx).unwrap());
    assert!(!kit.data_dir().join("memory.sqlite").exists());
    assert!(!format!("{:?}", memory.embedder(&ctx).unwrap()).contains("loaded: true"));

    kit.call_ok(
        "memory_save",
        json!({"content": "The boat is moored at pier 9."}),
    )
    .await;
    // A fresh engine on the same data: a warm-up and a search at the same time get one
    // index and one model, and both answer.
    let fresh = ctx.to_builder().build();
    let memory = fresh.shared_state::<Memory>();
    let (c, m) = (fresh.clone(), std::sync::Arc::clone(&memory));
    let warming = std::thread::spawn(move || m.warm(&c).unwrap());
    let index = memory.memory(&fresh).unwrap();
    let found = index
        .search("where is the boat", 1, klaw_memory::SearchMode::Hybrid)
        .unwrap();
    assert!(warming.join().unwrap());
    assert_eq!(found[0].content, "The boat is moored at pier 9.");
    assert!(std::sync::Arc::ptr_eq(
        &index,
        &memory.memory(&fresh).unwrap()
    ));
    assert!(format!("{:?}", index.embedder()).contains("loaded: true"));

    // Warming alone loads the model.
    let fresh = ctx.to_builder().build();
    let memory = fresh.shared_state::<Memory>();
    assert!(memory.warm(&fresh).unwrap());
    assert!(format!("{:?}", memory.embedder(&fresh).unwrap()).contains("loaded: true"));
}

/// A text of several chunks in the form chunking keeps: a paragraph too long for one
/// chunk (split with overlap), short paragraphs, headings, a code fence.
fn long_text() -> String {
    let para = |n: usize, w: &str| {
        (0..n)
            .map(|i| format!("{w}{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "# Отчёт о поездке\n\nМы выехали в понедельник.\nВернулись в пятницу.\n\n{}\n\n## Расходы\n\n{}\n\n```text\nбилеты 120\n\nгостиница 300\n```\n\nИтого 420 евро.",
        para(900, "день"),
        para(150, "trip")
    )
}

#[tokio::test]
async fn memory_get_gives_back_a_saved_document_whole_and_in_windows() {
    let kit = kit();
    let text = long_text();
    let saved = kit
        .call_ok(
            "memory_save",
            json!({"content": text, "source": "notes/trip.md"}),
        )
        .await;
    assert!(saved["chunks"].as_u64().unwrap() > 3, "{saved}");
    let lines = text.lines().count() as u64;
    let got = kit
        .call_ok("memory_get", json!({"source": "notes/trip.md"}))
        .await;
    assert_eq!(got["content"].as_str().unwrap(), text, "{got}");
    assert_eq!(got["source"], "notes/trip.md");
    assert_eq!(got["chunks"], saved["chunks"]);
    assert_eq!(
        (&got["startLine"], &got["endLine"], &got["totalLines"]),
        (&json!(1), &json!(lines), &json!(lines))
    );
    assert_eq!(got["truncated"], false);
    assert_eq!(got["nextStartLine"], Value::Null);

    // a window, and where to go on
    let w = kit
        .call_ok(
            "memory_get",
            json!({"source": "notes/trip.md", "startLine": 3, "maxLines": 2}),
        )
        .await;
    assert_eq!(
        w["content"],
        "Мы выехали в понедельник.\nВернулись в пятницу."
    );
    assert_eq!((&w["endLine"], &w["nextStartLine"]), (&json!(4), &json!(5)));

    // by a chunk id memory_search gives: the chunk's whole document
    let found = kit
        .call_ok(
            "memory_search",
            json!({"query": "гостиница 300", "mode": "text"}),
        )
        .await;
    let hit = &found["results"][0];
    assert_eq!(hit["source"], "notes/trip.md", "{found}");
    let id = hit["chunkId"].as_i64().unwrap();
    let by_id = kit.call_ok("memory_get", json!({"chunkId": id})).await;
    assert_eq!(by_id["content"].as_str().unwrap(), text);

    // past the end
    let e = kit
        .call_err(
            "memory_get",
            json!({"source": "notes/trip.md", "startLine": lines + 1}),
        )
        .await;
    invalid(&e, "/startLine", "past the end");
    assert!(
        e.message().contains(&format!("has {lines} lines")),
        "{}",
        e.message()
    );
}

#[tokio::test]
async fn memory_get_gives_a_conversation_s_turns_in_order() {
    use klaw_memory::Memory;
    use klaw_memory::conversation::{Turn, documents};
    let kit = kit();
    let turn = |id: &str, speaker: &str, text: &str, t: i64| Turn {
        session: "s1".into(),
        id: id.into(),
        speaker: speaker.into(),
        text: text.into(),
        created_at: Some(1_700_000_000 + t),
    };
    let turns = [
        turn("s1.01", "user", "Which shoes should I take?", 0),
        turn("s1.02", "assistant", "The blue ones, 38 euros.", 60),
        turn("s1.03", "user", "Fine, order them.", 120),
    ];
    let ctx = kit.context().clone();
    tokio::task::spawn_blocking(move || {
        let memory = ctx.shared_state::<Memory>();
        let index = memory.memory(&ctx).unwrap();
        index.save_all(&documents(&turns, "chat.jsonl")).unwrap();
    })
    .await
    .unwrap();
    let got = kit
        .call_ok("memory_get", json!({"source": "chat.jsonl"}))
        .await;
    assert_eq!(
        got["content"],
        "user: Which shoes should I take?\nassistant: The blue ones, 38 euros.\nuser: Fine, order them."
    );
    assert_eq!((&got["totalLines"], &got["chunks"]), (&json!(3), &json!(3)));
    // one turn by its own source
    let one = kit
        .call_ok("memory_get", json!({"source": "chat.jsonl#s1.02"}))
        .await;
    assert_eq!(one["content"], "assistant: The blue ones, 38 euros.");
    // an unknown source is not found, with the close ones suggested
    let e = kit
        .call_err("memory_get", json!({"source": "chat.jsnl"}))
        .await;
    assert!(e.is_not_found(), "{}", e.to_model_text());
    assert!(
        e.message().contains("did you mean chat.jsonl"),
        "{}",
        e.message()
    );
    let e = kit.call_err("memory_get", json!({"chunkId": 9999})).await;
    assert!(e.is_not_found(), "{}", e.to_model_text());
    assert!(e.message().contains("no chunk 9999"), "{}", e.message());
}

#[tokio::test]
async fn memory_get_wants_a_source_or_a_chunk_id_and_creates_nothing() {
    let kit = kit();
    let e = kit.call_err("memory_get", json!({})).await;
    invalid(&e, "/source", "give source or chunkId");
    let e = kit
        .call_err("memory_get", json!({"source": "a", "chunkId": 1}))
        .await;
    invalid(&e, "/chunkId", "not both");
    let e = kit
        .call_err("memory_get", json!({"source": "a", "maxLines": 2001}))
        .await;
    assert_eq!(e.pointer(), Some("/maxLines"), "{}", e.to_model_text());
    let e = kit.call_err("memory_get", json!({"source": "a"})).await;
    assert!(e.is_not_found(), "{}", e.to_model_text());
    assert!(e.message().contains("memory is empty"), "{}", e.message());
    assert!(!kit.data_dir().join("memory.sqlite").exists());
}
