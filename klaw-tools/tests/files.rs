//! The file tools, called by name through the registry as the engine calls them: each
//! tool's behaviour and every error text.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::os::unix::fs::{PermissionsExt, symlink};

use klaw_tools::testing::Kit;
use klaw_tools::tools::files::FilesSettings;
use klaw_tools::{Limits, Settings, ToolError};
use serde_json::{Value, json};

fn kit() -> Kit {
    Kit::new().expect("kit")
}

fn kit_with(limits: Limits) -> Kit {
    Kit::with_limits(limits, Settings::default()).expect("kit")
}

/// `file_write` in its default mode (overwrite), which must succeed.
async fn write_ok(kit: &Kit, path: &str, content: &str) -> Value {
    kit.call_ok("file_write", json!({"path": path, "content": content}))
        .await
}

/// `file_write` with `mode = append`, which must succeed.
async fn append_ok(kit: &Kit, path: &str, content: &str) -> Value {
    kit.call_ok(
        "file_write",
        json!({"path": path, "content": content, "mode": "append"}),
    )
    .await
}

fn denied(e: &ToolError) {
    assert!(
        e.is_access_denied(),
        "{} ({:?})",
        e.to_model_text(),
        e.detail()
    );
    assert_eq!(e.message(), "Access denied: path outside workspace");
}

// ---------------------------------------------------------------- file_read

#[tokio::test]
async fn file_read_reads_file_from_workspace() {
    let kit = kit();
    kit.write("notes.md", "a\nb\nc\n").unwrap();
    let r = kit.call_ok("file_read", json!({"path": "notes.md"})).await;
    assert_eq!(r["content"], "a\nb\nc\n");
    assert_eq!(r["totalLines"], 3);
    assert_eq!(r["startLine"], 1);
    assert_eq!(r["endLine"], 3);
    assert_eq!(r["truncated"], false);
    assert_eq!(r["nextStartLine"], Value::Null);
    assert_eq!(r["size"], 6);
}

#[tokio::test]
async fn file_read_with_start_line_and_max_lines() {
    let kit = kit();
    kit.write("notes.md", "a\nb\nc\nd").unwrap();
    let r = kit
        .call_ok("file_read", json!({"path": "notes.md", "startLine": 2}))
        .await;
    assert_eq!(r["content"], "b\nc\nd");
    assert_eq!(r["totalLines"], 4);
    let r = kit
        .call_ok(
            "file_read",
            json!({"path": "notes.md", "startLine": 2, "maxLines": 2}),
        )
        .await;
    assert_eq!(r["content"], "b\nc\n");
    assert_eq!(r["endLine"], 3);
    assert_eq!(r["nextStartLine"], 4);
    assert_eq!(r["truncated"], false);
    // The snake_case spelling is accepted too.
    let r = kit
        .call_ok(
            "file_read",
            json!({"path": "notes.md", "start_line": 4, "max_lines": 9}),
        )
        .await;
    assert_eq!(r["content"], "d");
    assert_eq!(r["nextStartLine"], Value::Null);
}

#[tokio::test]
async fn file_read_window_past_the_end_is_an_error() {
    let kit = kit();
    kit.write("n.txt", "a\nb\n").unwrap();
    let e = kit
        .call_err("file_read", json!({"path": "n.txt", "startLine": 3}))
        .await;
    assert!(e.is_invalid_arguments());
    assert_eq!(
        e.message(),
        "/startLine: 3 is past the end of the file (2 lines)"
    );
    let e = kit
        .call_err("file_read", json!({"path": "n.txt", "startLine": 0}))
        .await;
    assert_eq!(e.message(), "/startLine: lines count from 1");
    let e = kit
        .call_err("file_read", json!({"path": "n.txt", "maxLines": 0}))
        .await;
    assert_eq!(e.message(), "/maxLines: must be at least 1");
    kit.write("empty.txt", "").unwrap();
    let r = kit.call_ok("file_read", json!({"path": "empty.txt"})).await;
    assert_eq!(r["content"], "");
    assert_eq!(r["totalLines"], 0);
    assert_eq!(r["endLine"], 0);
}

#[tokio::test]
async fn file_read_is_capped_in_bytes_and_says_where_to_continue() {
    let mut limits = Limits::default();
    limits.max_read_bytes = 10;
    let kit = kit_with(limits);
    kit.write("big.txt", "1234\n5678\nabcd\nefgh\n").unwrap();
    let r = kit.call_ok("file_read", json!({"path": "big.txt"})).await;
    assert_eq!(r["content"], "1234\n5678\n");
    assert_eq!(r["truncated"], true);
    assert_eq!(r["nextStartLine"], 3);
    assert_eq!(r["totalLines"], 4);
    let r = kit
        .call_ok("file_read", json!({"path": "big.txt", "startLine": 3}))
        .await;
    assert_eq!(r["content"], "abcd\nefgh\n");
    assert_eq!(r["truncated"], false);
    // One line longer than the cap: cut at a character boundary, move past it.
    kit.write("long.txt", "ééééééééé\nx\n").unwrap();
    let r = kit.call_ok("file_read", json!({"path": "long.txt"})).await;
    assert_eq!(r["content"], "ééééé");
    assert_eq!(r["truncated"], true);
    assert_eq!(r["nextStartLine"], 2);
}

#[tokio::test]
async fn file_read_window_near_the_end_of_a_large_file() {
    let kit = kit();
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    let n = 200_000; // 12.8 MB, several read buffers
    kit.write("large.log", line.repeat(n)).unwrap();
    let r = kit
        .call_ok(
            "file_read",
            json!({"path": "large.log", "startLine": n - 2, "maxLines": 10}),
        )
        .await;
    assert_eq!(r["content"], line.repeat(3));
    assert_eq!(r["totalLines"], n);
    assert_eq!(r["endLine"], n);
}

#[tokio::test]
async fn file_read_refuses_binary_and_special_files() {
    let kit = kit();
    kit.write("a.bin", b"\x7fELF\x02\x01\x01\0\0\0").unwrap();
    let e = kit.call_err("file_read", json!({"path": "a.bin"})).await;
    assert_eq!(
        e.message(),
        "binary file: a.bin; file_read returns text only"
    );
    kit.write("latin1.txt", b"caf\xe9 cr\xe8me").unwrap();
    let e = kit
        .call_err("file_read", json!({"path": "latin1.txt"}))
        .await;
    assert!(e.message().starts_with("binary file"), "{e}");

    let fifo = kit.workspace().join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let e = kit.call_err("file_read", json!({"path": "pipe"})).await;
    assert_eq!(
        e.message(),
        "not a regular file (a FIFO): pipe; only regular files can be read or written"
    );
    let e = kit
        .call_err(
            "file_write",
            json!({"path": "pipe", "content": "x", "mode": "append"}),
        )
        .await;
    assert!(
        e.message().starts_with("not a regular file (a FIFO)"),
        "{e}"
    );

    let _sock = std::os::unix::net::UnixListener::bind(kit.workspace().join("sock")).unwrap();
    let e = kit.call_err("file_read", json!({"path": "sock"})).await;
    assert!(
        e.message().starts_with("not a regular file (a socket)"),
        "{e}"
    );

    // A device reached through a symlink is outside the workspace anyway.
    symlink("/dev/zero", kit.workspace().join("zero")).unwrap();
    denied(&kit.call_err("file_read", json!({"path": "zero"})).await);

    std::fs::create_dir(kit.workspace().join("dir")).unwrap();
    let e = kit.call_err("file_read", json!({"path": "dir"})).await;
    assert_eq!(e.message(), "is a directory: dir");
    let e = kit
        .call_err("file_read", json!({"path": "missing.txt"}))
        .await;
    assert!(e.is_not_found());
    assert_eq!(e.message(), "not found: missing.txt");
}

#[tokio::test]
async fn file_read_rejects_path_outside_workspace() {
    let kit = kit();
    std::fs::write(kit.root().join("secret.txt"), "SECRET").unwrap();
    denied(
        &kit.call_err("file_read", json!({"path": "../secret.txt"}))
            .await,
    );
    denied(
        &kit.call_err("file_read", json!({"path": "a/../../secret.txt"}))
            .await,
    );
    denied(
        &kit.call_err("file_read", json!({"path": "../../../../../../etc/passwd"}))
            .await,
    );
}

#[tokio::test]
async fn file_read_rejects_absolute_path_outside_workspace() {
    let kit = kit();
    denied(
        &kit.call_err("file_read", json!({"path": "/etc/passwd"}))
            .await,
    );
    let secret = kit.root().join("secret.txt");
    std::fs::write(&secret, "SECRET").unwrap();
    denied(&kit.call_err("file_read", json!({"path": secret})).await);
    // A sibling whose name starts with the workspace's is not inside it.
    let sibling = format!("{}x/f", kit.workspace().display());
    denied(&kit.call_err("file_read", json!({"path": sibling})).await);
    // `..` after the workspace prefix is still resolved by the kernel.
    let sneaky = format!("{}/../secret.txt", kit.workspace().display());
    denied(&kit.call_err("file_read", json!({"path": sneaky})).await);
}

#[tokio::test]
async fn absolute_paths_inside_the_workspace_are_accepted() {
    let kit = kit();
    kit.write("sub/in.txt", "inside").unwrap();
    let p = kit.workspace().join("sub/in.txt");
    let r = kit.call_ok("file_read", json!({"path": p})).await;
    assert_eq!(r["content"], "inside");
    let canonical = std::fs::canonicalize(&p).unwrap();
    let r = kit.call_ok("file_read", json!({"path": canonical})).await;
    assert_eq!(r["content"], "inside");
}

#[tokio::test]
async fn symlinks_inside_are_followed_and_links_out_refused() {
    let kit = kit();
    kit.write("real/file.txt", "real").unwrap();
    std::fs::write(kit.root().join("secret.txt"), "SECRET").unwrap();
    let ws = kit.workspace();
    symlink("real/file.txt", ws.join("rel_in")).unwrap();
    symlink("real", ws.join("dir_in")).unwrap();
    symlink("../secret.txt", ws.join("rel_out")).unwrap();
    symlink(kit.root().join("secret.txt"), ws.join("abs_out")).unwrap();
    symlink(kit.root(), ws.join("dir_out")).unwrap();
    symlink(ws.join("real/file.txt"), ws.join("abs_in")).unwrap();
    assert_eq!(
        kit.call_ok("file_read", json!({"path": "rel_in"})).await["content"],
        "real"
    );
    assert_eq!(
        kit.call_ok("file_read", json!({"path": "dir_in/file.txt"}))
            .await["content"],
        "real"
    );
    for p in ["rel_out", "abs_out", "dir_out/secret.txt", "abs_in"] {
        denied(&kit.call_err("file_read", json!({"path": p})).await);
    }
    // Writing through a link that leads out is refused, and nothing changes outside.
    for p in [
        "rel_out",
        "abs_out",
        "dir_out/secret.txt",
        "dir_out/new.txt",
    ] {
        for mode in ["overwrite", "append"] {
            denied(
                &kit.call_err(
                    "file_write",
                    json!({"path": p, "content": "pwned", "mode": mode}),
                )
                .await,
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(kit.root().join("secret.txt")).unwrap(),
        "SECRET"
    );
    assert!(!kit.root().join("new.txt").exists());
    // Writing through a link inside writes the target and keeps the link.
    write_ok(&kit, "rel_in", "changed").await;
    assert_eq!(kit.read("real/file.txt").unwrap(), "changed");
    assert!(ws.join("rel_in").symlink_metadata().unwrap().is_symlink());
}

#[tokio::test]
async fn bad_paths_are_invalid_arguments_not_panics() {
    let kit = kit();
    let e = kit.call_err("file_read", json!({"path": "a\u{0}b"})).await;
    assert!(e.is_invalid_arguments());
    assert_eq!(e.message(), "/path: contains a NUL byte");
    let e = kit
        .call_err("file_read", json!({"path": "x".repeat(5000)}))
        .await;
    assert!(e.message().starts_with("/path: too long ("), "{e}");
    let e = kit
        .call_err(
            "file_write",
            json!({"path": "y".repeat(300), "content": ""}),
        )
        .await;
    assert!(
        e.message()
            .starts_with("/path: too long (the whole or a name in it): "),
        "{e}"
    );
    let e = kit
        .call_err("file_write", json!({"path": ".", "content": "x"}))
        .await;
    assert_eq!(e.message(), "/path: not a file path: .");
    let e = kit
        .call_err("file_write", json!({"path": "a/..", "content": "x"}))
        .await;
    assert_eq!(e.message(), "/path: not a file path: a/..");
}

// ---------------------------------------------------------------- file_write

#[tokio::test]
async fn file_write_creates_new_file_and_parent_directories() {
    let kit = kit();
    let r = write_ok(&kit, "deep/er/new.txt", "hello").await;
    assert_eq!(
        r,
        json!({"path": "deep/er/new.txt", "mode": "overwrite", "bytesWritten": 5, "size": 5, "created": true})
    );
    assert_eq!(kit.read("deep/er/new.txt").unwrap(), "hello");
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(kit.workspace().join("deep/er"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["new.txt"]);
}

#[tokio::test]
async fn file_write_append_mode() {
    let kit = kit();
    kit.write("log.txt", "one\n").unwrap();
    let r = append_ok(&kit, "log.txt", "two\n").await;
    assert_eq!(r["size"], 8);
    assert_eq!(r["created"], false);
    assert_eq!(kit.read("log.txt").unwrap(), "one\ntwo\n");
    let r = append_ok(&kit, "fresh.txt", "x").await;
    assert_eq!(r["created"], true);
    assert_eq!(kit.read("fresh.txt").unwrap(), "x");
}

#[tokio::test]
async fn file_write_overwrite_mode_keeps_permissions() {
    let kit = kit();
    kit.write("run.sh", "old old old").unwrap();
    let p = kit.workspace().join("run.sh");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap();
    let r = kit
        .call_ok(
            "file_write",
            json!({"path": "run.sh", "content": "new", "mode": "overwrite"}),
        )
        .await;
    assert_eq!(r["created"], false);
    assert_eq!(kit.read("run.sh").unwrap(), "new");
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
        0o750
    );
    let e = kit
        .call_err(
            "file_write",
            json!({"path": "run.sh", "content": "x", "mode": "truncate"}),
        )
        .await;
    assert!(e.is_invalid_arguments(), "{e}");
}

#[tokio::test]
async fn file_write_rejects_file_larger_than_max_file_size_bytes() {
    let kit = kit_with(Limits::default().with_max_file_size_bytes(10));
    let e = kit
        .call_err(
            "file_write",
            json!({"path": "big.txt", "content": "x".repeat(11)}),
        )
        .await;
    assert_eq!(
        e.message(),
        "/content: file would be 11 bytes, over the limit of 10 bytes (maxFileSizeBytes); nothing was written"
    );
    assert!(!kit.workspace().join("big.txt").exists());
    write_ok(&kit, "a.txt", "123456").await;
    // Append: the resulting size counts, and nothing is written.
    let e = kit
        .call_err(
            "file_write",
            json!({"path": "a.txt", "content": "78901", "mode": "append"}),
        )
        .await;
    assert_eq!(
        e.message(),
        "/content: file would be 11 bytes, over the limit of 10 bytes (maxFileSizeBytes); nothing was written"
    );
    assert_eq!(kit.read("a.txt").unwrap(), "123456");
    append_ok(&kit, "a.txt", "7890").await;
    assert_eq!(kit.read("a.txt").unwrap(), "1234567890");
}

#[tokio::test]
async fn file_write_rejects_path_outside_workspace() {
    let kit = kit();
    for p in [
        "../escape.txt",
        "/tmp/klaw-escape.txt",
        "a/../../escape.txt",
    ] {
        denied(
            &kit.call_err("file_write", json!({"path": p, "content": "x"}))
                .await,
        );
    }
    assert!(!kit.root().join("escape.txt").exists());
    assert!(!std::path::Path::new("/tmp/klaw-escape.txt").exists());
    std::fs::create_dir(kit.workspace().join("d")).unwrap();
    let e = kit
        .call_err("file_write", json!({"path": "d", "content": "x"}))
        .await;
    assert_eq!(e.message(), "is a directory: d");
}

// ---------------------------------------------------------------- file_edit

#[tokio::test]
async fn file_edit_replaces_text() {
    let kit = kit();
    kit.write("a.txt", "foo bar foo\n").unwrap();
    let r = kit
        .call_ok(
            "file_edit",
            json!({"path": "a.txt", "oldText": "foo", "newText": "baz"}),
        )
        .await;
    assert_eq!(r, json!({"path": "a.txt", "changes": 2, "size": 12}));
    assert_eq!(kit.read("a.txt").unwrap(), "baz bar baz\n");
    let r = kit
        .call_ok(
            "file_edit",
            json!({"path": "a.txt", "old_text": "baz", "new_text": "q", "replace_all": false}),
        )
        .await;
    assert_eq!(r["changes"], 1);
    assert_eq!(kit.read("a.txt").unwrap(), "q bar baz\n");
}

#[tokio::test]
async fn file_edit_replaces_a_line_range() {
    let kit = kit();
    kit.write("a.txt", "1\n2\n3\n4\n").unwrap();
    let r = kit
        .call_ok(
            "file_edit",
            json!({"path": "a.txt", "startLine": 2, "endLine": 3, "newText": "two-three"}),
        )
        .await;
    assert_eq!(r["changes"], 2);
    assert_eq!(kit.read("a.txt").unwrap(), "1\ntwo-three\n4\n");
}

#[tokio::test]
async fn file_edit_error_texts() {
    let kit = kit_with(Limits::default().with_max_file_size_bytes(20));
    kit.write("a.txt", "1\n2\n").unwrap();
    let e = kit
        .call_err(
            "file_edit",
            json!({"path": "a.txt", "oldText": "zzz", "newText": "y"}),
        )
        .await;
    assert_eq!(e.message(), "old_text not found in file");
    let e = kit
        .call_err(
            "file_edit",
            json!({"path": "a.txt", "startLine": 2, "endLine": 5, "newText": "y"}),
        )
        .await;
    assert_eq!(
        e.message(),
        "line range out of bounds: lines 2..5 of a file with 2 lines"
    );
    let e = kit
        .call_err(
            "file_edit",
            json!({"path": "a.txt", "oldText": "1", "newText": "1"}),
        )
        .await;
    assert_eq!(e.message(), "edit made no changes");
    let e = kit
        .call_err(
            "file_edit",
            json!({"path": "a.txt", "oldText": "1", "newText": "x".repeat(30)}),
        )
        .await;
    assert!(
        e.message().starts_with("/content: file would be 33 bytes"),
        "{e}"
    );
    let e = kit
        .call_err("file_edit", json!({"path": "a.txt", "newText": "y"}))
        .await;
    assert_eq!(
        e.message(),
        "give oldText (text replacement) or startLine and endLine (line replacement)"
    );
    let e = kit
        .call_err(
            "file_edit",
            json!({"path": "a.txt", "oldText": "1", "startLine": 1, "endLine": 1, "newText": "y"}),
        )
        .await;
    assert_eq!(
        e.message(),
        "give either oldText or startLine and endLine, not both"
    );
    let e = kit
        .call_err(
            "file_edit",
            json!({"path": "a.txt", "startLine": 1, "newText": "y"}),
        )
        .await;
    assert_eq!(e.message(), "/endLine: required with startLine");
    let e = kit
        .call_err(
            "file_edit",
            json!({"path": "a.txt", "oldText": "", "newText": "y"}),
        )
        .await;
    assert_eq!(
        e.message(),
        "/oldText: empty; give the exact text to replace"
    );
    assert_eq!(
        kit.read("a.txt").unwrap(),
        "1\n2\n",
        "no error changed the file"
    );
    denied(
        &kit.call_err(
            "file_edit",
            json!({"path": "../a.txt", "oldText": "1", "newText": "y"}),
        )
        .await,
    );
}

// ---------------------------------------------------------------- file_list

#[tokio::test]
async fn file_list_directory_listing() {
    let kit = kit();
    kit.write("b.txt", "bb").unwrap();
    kit.write("a/inner.txt", "i").unwrap();
    symlink("/etc", kit.workspace().join("link")).unwrap();
    std::fs::set_permissions(
        kit.workspace().join("b.txt"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    let r = kit.call_ok("file_list", json!({"path": "."})).await;
    assert_eq!(r["count"], 3);
    assert_eq!(r["truncated"], false);
    let e = &r["entries"];
    assert_eq!(e[0]["name"], "a");
    assert_eq!(e[0]["type"], "directory");
    assert_eq!(e[1]["name"], "b.txt");
    assert_eq!(e[1]["path"], "b.txt");
    assert_eq!(e[1]["type"], "file");
    assert_eq!(e[1]["size"], 2);
    assert_eq!(e[1]["mode"], "0640");
    assert_eq!(e[2]["name"], "link");
    assert_eq!(e[2]["type"], "symlink");
    let r = kit.call_ok("file_list", json!({"path": "a"})).await;
    assert_eq!(r["entries"][0]["path"], "a/inner.txt");
    let e = kit.call_err("file_list", json!({"path": "b.txt"})).await;
    assert_eq!(e.message(), "not a directory: b.txt");
    denied(&kit.call_err("file_list", json!({"path": "link"})).await);
    denied(&kit.call_err("file_list", json!({"path": ".."})).await);
    denied(&kit.call_err("file_list", json!({"path": "/"})).await);
}

#[tokio::test]
async fn file_list_recursive_listing_never_follows_links() {
    let kit = kit();
    kit.write("a/b/c.txt", "c").unwrap();
    kit.write("a/d.txt", "d").unwrap();
    symlink("..", kit.workspace().join("a/up")).unwrap();
    symlink(kit.root(), kit.workspace().join("out")).unwrap();
    let r = kit
        .call_ok("file_list", json!({"path": "", "recursive": true}))
        .await;
    let paths: Vec<&str> = r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a", "a/b", "a/b/c.txt", "a/d.txt", "a/up", "out"]);
}

#[tokio::test]
async fn file_list_is_capped() {
    let files = FilesSettings::default().with_max_list_entries(3);
    let kit = kit().with_context(|b| b.service(files));
    for i in 0..5 {
        kit.write(format!("d/f{i}"), "").unwrap();
    }
    let r = kit.call_ok("file_list", json!({"path": "d"})).await;
    assert_eq!(r["count"], 3);
    assert_eq!(r["truncated"], true);
    let r = kit
        .call_ok("file_list", json!({"path": ".", "recursive": true}))
        .await;
    assert_eq!(r["count"], 3);
    assert_eq!(r["truncated"], true);
    kit.write("e/one", "").unwrap();
    kit.write("e/two", "").unwrap();
    kit.write("e/three", "").unwrap();
    let r = kit.call_ok("file_list", json!({"path": "e"})).await;
    assert_eq!(r["truncated"], false, "exactly the cap is not truncated");
}

// ---------------------------------------------------------------- file_delete

#[tokio::test]
async fn file_delete_removes_one_file_not_a_directory() {
    let kit = kit();
    kit.write("d/x.txt", "x").unwrap();
    let r = kit.call_ok("file_delete", json!({"path": "d/x.txt"})).await;
    assert_eq!(r, json!({"path": "d/x.txt", "deleted": true}));
    assert!(!kit.workspace().join("d/x.txt").exists());
    let e = kit.call_err("file_delete", json!({"path": "d"})).await;
    assert_eq!(
        e.message(),
        "is a directory: d; file_delete removes files only"
    );
    let e = kit
        .call_err("file_delete", json!({"path": "d/x.txt"}))
        .await;
    assert!(e.is_not_found());
    // A link is removed, never its target.
    std::fs::write(kit.root().join("target.txt"), "T").unwrap();
    symlink("../target.txt", kit.workspace().join("l")).unwrap();
    kit.call_ok("file_delete", json!({"path": "l"})).await;
    assert_eq!(
        std::fs::read_to_string(kit.root().join("target.txt")).unwrap(),
        "T"
    );
    denied(
        &kit.call_err("file_delete", json!({"path": "../target.txt"}))
            .await,
    );
    assert!(kit.root().join("target.txt").exists());
}

// ---------------------------------------------------------------- file (legacy)

#[tokio::test]
async fn legacy_file_tool_forwards() {
    let kit = kit();
    let r = kit
        .call_ok(
            "file",
            json!({"operation": "write_file", "path": "n.txt", "content": "hi"}),
        )
        .await;
    assert_eq!(r["bytesWritten"], 2);
    let r = kit
        .call_ok("file", json!({"operation": "read_file", "path": "n.txt"}))
        .await;
    assert_eq!(r["content"], "hi");
    let r = kit
        .call_ok("file", json!({"operation": "list_dir", "path": "."}))
        .await;
    assert_eq!(r["entries"][0]["name"], "n.txt");
    let e = kit
        .call_err("file", json!({"operation": "write_file", "path": "n.txt"}))
        .await;
    assert_eq!(e.message(), "/content: missing: write_file needs it");
    kit.call_ok("file", json!({"operation": "delete_file", "path": "n.txt"}))
        .await;
    assert!(!kit.workspace().join("n.txt").exists());
    denied(
        &kit.call_err(
            "file",
            json!({"operation": "read_file", "path": "/etc/passwd"}),
        )
        .await,
    );
    let e = kit
        .call_err("file", json!({"operation": "chmod", "path": "n.txt"}))
        .await;
    assert!(e.is_invalid_arguments());
}

#[tokio::test]
async fn annotations_mark_readers_and_writers() {
    let kit = kit();
    for (name, read_only, destructive) in [
        ("file_read", true, false),
        ("file_list", true, false),
        ("file_write", false, true),
        ("file_edit", false, true),
        ("file_delete", false, true),
    ] {
        let a = kit.registry().by_name(name).unwrap().spec().annotations;
        assert_eq!(
            (a.read_only, a.destructive),
            (read_only, destructive),
            "{name}"
        );
    }
}
