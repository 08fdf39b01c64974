//! `klaw-engine storage import` (issue 44: moving from one engine to many): what one
//! engine kept in its data dir's SQLite files (a chat's history, core memory, a job, the
//! gateway's inbox and Telegram offset) copied into a real PostgreSQL, where an engine
//! of another machine (its own home, `storage.url`) carries on with it; run twice, it
//! adds nothing; other data under the same keys is refused unless `--force`; no
//! `storage.url`, an unreachable database or a missing data dir are clear errors.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::Path;
use std::process::{Command, Output, Stdio};

use klaw_engine::gateway::{InboxStore, SqliteInbox};

use crate::common;
use crate::common::postgres::Postgres;
use common::scripted::{Reply, ScriptedServer};
use common::{engine_in, run_with_stdin, stderr, stdout};

/// An engine of `home` (its data dir under it) with `model` as its model and, given,
/// `db` as `storage.url`.
fn engine(home: &Path, model: &str, db: Option<&str>, args: &[&str]) -> Command {
    let mut cmd = engine_in(home, args);
    cmd.env("KLAW_LLM_BASE_URL", model)
        .env("KLAW_LLM_MODEL", "test-model")
        .env("KLAW_LLM_API_KEY", "sk-test")
        .env("KLAW_LLM_RETRIES", "0")
        .env("KLAW_APPROVAL", "never")
        .env("KLAW_LOG_LEVEL", "error");
    if let Some(db) = db {
        cmd.env("KLAW_DATABASE_URL", db);
    }
    cmd
}

fn output(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null()).output().unwrap()
}

/// `storage import` of `home`'s data dir into `db`, with `extra` arguments.
fn import(home: &Path, db: &str, extra: &[&str]) -> Output {
    let mut args = vec!["storage", "import"];
    args.extend_from_slice(extra);
    output(engine(home, "http://127.0.0.1:9/v1", Some(db), &args))
}

/// The line of `store` in an import's output.
fn line<'a>(out: &'a str, store: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{store} (")))
        .unwrap_or_else(|| panic!("no line of {store} in {out}"))
}

/// A single engine on SQLite chats, remembers, gets a job and Telegram messages; its
/// data dir is imported into PostgreSQL, where an engine of another home answers the
/// same chat with what the first one knew. A second import adds nothing; other data
/// under the same keys is refused, store by store, until `--force`.
#[test]
fn storage_import_moves_one_engines_data_into_postgres_once() {
    let Some(pg) = Postgres::start() else {
        return;
    };
    let db = pg.fresh_db();
    let server = ScriptedServer::script(vec![
        Reply::openai_answer("Nice to meet you, Ann."),
        Reply::openai_answer("Good morning!"),
        Reply::openai_answer("Your name is Ann."),
    ]);
    let model = format!("{}/v1", server.url);
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The single engine, on its data dir.
    let o = run_with_stdin(
        engine(one.path(), &model, None, &["chat"]),
        "My name is Ann.\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = output(engine(
        one.path(),
        &model,
        None,
        &[
            "schedule",
            "add",
            "morning",
            "0 9 * * *",
            "Say good morning",
            "--history-messages",
            "3",
        ],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    // One run of it, recorded in the data dir.
    let o = output(engine(
        one.path(),
        &model,
        None,
        &["schedule", "run-now", "morning"],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let data = common::dirs(one.path()).0;
    std::fs::write(
        data.join("core_memory.json"),
        r#"{"user":{"city":"Oslo"},"agent":{"tone":"brief"}}"#,
    )
    .unwrap();
    let inbox = SqliteInbox::open(&data.join("gateway.db")).unwrap();
    let waiting = klaw_engine::gateway::Incoming {
        channel: "telegram".into(),
        chat_id: "42".into(),
        from: "ann".into(),
        text: "still there?".into(),
        receipt: Some(700),
    };
    inbox
        .accept("telegram", std::slice::from_ref(&waiting), 701)
        .unwrap();
    drop(inbox);
    // Every file of the data dir with its size and contents' hash: the import reads only.
    let files = || {
        let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        all.sort();
        all
    };
    let before = files();

    let o = import(one.path(), &db, &[]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(line(&out, "schedule").contains("1 jobs added"), "{out}");
    // The console's chat and the run's.
    assert!(line(&out, "history").contains("2 chats added"), "{out}");
    assert!(line(&out, "core memory").contains("2 keys added"), "{out}");
    assert!(line(&out, "inbox").contains("1 messages added"), "{out}");
    assert!(
        files() == before,
        "the import changed the data dir: {:?}",
        files().iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let counts = || {
        pg.psql_url(
            &db,
            "SELECT (SELECT count(*) FROM jobs) || ' ' || (SELECT count(*) FROM runs) || ' ' ||
                    (SELECT count(*) FROM history_messages) || ' ' ||
                    (SELECT count(*) FROM history_usage) || ' ' ||
                    (SELECT count(*) FROM gateway_inbox) || ' ' ||
                    (SELECT string_agg(channel || '=' || next, ',') FROM gateway_cursors) || ' ' ||
                    (SELECT doc FROM core_memory)",
        )
    };
    let after_one = counts();
    // One job and its run; 4 messages and 2 usage rows in two chats; one message
    // waiting and the Telegram offset.
    assert!(
        after_one.starts_with("1 1 4 2 1 telegram=701 "),
        "{after_one}"
    );
    assert_eq!(
        pg.psql_url(&db, "SELECT job || ' ' || status FROM runs"),
        "morning ok"
    );
    // The job's own history's length came along with it.
    assert_eq!(pg.psql_url(&db, "SELECT history_messages FROM jobs"), "3");
    assert!(
        after_one.contains(r#""city":"Oslo""#) && after_one.contains(r#""tone":"brief""#),
        "{after_one}"
    );

    // Twice: nothing added, nothing changed.
    let o = import(one.path(), &db, &[]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    for (store, what) in [
        (
            "schedule",
            "0 jobs added, 1 already there, 0 replaced; 0 rows",
        ),
        (
            "history",
            "0 chats added, 2 already there, 0 replaced; 0 rows",
        ),
        (
            "core memory",
            "0 keys added, 2 already there, 0 replaced; 0 rows",
        ),
        (
            "inbox",
            "0 messages added, 1 already there, 0 replaced; 0 rows",
        ),
    ] {
        assert!(line(&out, store).contains(what), "{store}: {out}");
    }
    assert_eq!(counts(), after_one);

    // An engine of another machine on the database carries on: the job is listed, the
    // chat and core memory are in its request to the model.
    let o = output(engine(two.path(), &model, Some(&db), &["schedule", "list"]));
    assert!(
        stdout(&o).contains("morning"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = run_with_stdin(
        engine(two.path(), &model, Some(&db), &["chat"]),
        "What is my name?\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Your name is Ann.\n");
    let asked = &server.requests()[2];
    let messages = asked.body["messages"].as_array().unwrap();
    let contents: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(contents.contains(&"My name is Ann."), "{contents:?}");
    assert!(contents.contains(&"Nice to meet you, Ann."), "{contents:?}");
    if cfg!(feature = "memory") {
        assert!(contents[0].contains("Oslo"), "{}", contents[0]);
    }
    // Imported again after the engines went on: the chat, now longer, is the same one.
    let o = import(one.path(), &db, &[]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        line(&stdout(&o), "history").contains("0 chats added, 2 already there"),
        "{}",
        stdout(&o)
    );

    // Other data under the same keys: that store refused, naming them; the rest fine.
    pg.psql_url(
        &db,
        "UPDATE jobs SET message = 'changed' WHERE name = 'morning';
         UPDATE core_memory SET doc = '{\"user\":{\"city\":\"Bergen\"},\"agent\":{}}'",
    );
    let o = import(one.path(), &db, &[]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("other definitions for 1 of the schedule's jobs (morning)")
            && err.contains("--force"),
        "{err}"
    );
    assert!(err.contains("user.city"), "{err}");
    assert!(line(&out, "history").contains("2 already there"), "{out}");
    assert_eq!(
        pg.psql_url(&db, "SELECT message FROM jobs WHERE name = 'morning'"),
        "changed"
    );
    // --force: the data dir's version wins; keys only the database has are kept.
    pg.psql_url(
        &db,
        "UPDATE core_memory SET doc = '{\"user\":{\"city\":\"Bergen\",\"pet\":\"cat\"},\"agent\":{}}'",
    );
    let o = import(one.path(), &db, &["--force"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(line(&out, "schedule").contains("1 replaced"), "{out}");
    assert!(
        line(&out, "core memory").contains("1 keys added, 0 already there, 1 replaced"),
        "{out}"
    );
    assert_eq!(
        pg.psql_url(&db, "SELECT message FROM jobs WHERE name = 'morning'"),
        "Say good morning"
    );
    let doc = pg.psql_url(&db, "SELECT doc FROM core_memory");
    assert!(
        doc.contains(r#""city":"Oslo""#) && doc.contains(r#""pet":"cat""#),
        "{doc}"
    );
}

/// Bad input: no `storage.url`, a database that cannot be reached, a data dir that is
/// not there, a file that is no database: exit 1 with a clear error, no panic, the
/// password never shown.
#[test]
fn storage_import_errors_are_clear() {
    let home = tempfile::tempdir().unwrap();
    let o = output(engine(
        home.path(),
        "http://127.0.0.1:9/v1",
        None,
        &["storage", "import"],
    ));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("storage.url (KLAW_DATABASE_URL) is not set"),
        "{err}"
    );
    std::fs::create_dir_all(common::dirs(home.path()).0).unwrap();
    let o = import(
        home.path(),
        "postgres://klaw:secret-pw@%2Fnonexistent%2Fklaw/klaw",
        &[],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot connect") && err.contains("/nonexistent/klaw"),
        "{err}"
    );
    assert!(
        !err.contains("secret-pw") && !err.contains("panicked"),
        "{err}"
    );
    let Some(pg) = Postgres::start() else {
        return;
    };
    let db = pg.fresh_db();
    let o = import(home.path(), &db, &["--from", "/no/such/dir"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("/no/such/dir is not a directory"), "{err}");
    // A data dir with nothing in it: nothing to import, said per store.
    let empty = tempfile::tempdir().unwrap();
    let from = empty.path().display().to_string();
    let o = import(home.path(), &db, &["--from", &from]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).matches("nothing to import").count(), 4);
    // A file that is no database: that store's error names it; the others go on.
    std::fs::write(empty.path().join("agent.db"), "not a database").unwrap();
    let o = import(home.path(), &db, &["--from", &from]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("agent.db") && !err.contains("panicked"),
        "{err}"
    );
    assert_eq!(stdout(&o).matches("nothing to import").count(), 3);
}
