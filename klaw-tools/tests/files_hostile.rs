//! The workspace boundary under attack: a generated corpus of hostile paths against
//! every file tool, and a symlink flipped between an inside and an outside target while
//! reads loop. A canary sits outside the workspace: no answer may contain it, and the
//! tree outside the workspace must be byte-identical afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;
use klaw_tools::{ErrorKind, ToolContext, ToolRegistry};
use serde_json::{Value, json};

/// The secret outside the workspace.
fn canary() -> String {
    format!("KLAW-CANARY-{}-7f3a", std::process::id())
}

/// Where a path comes from, which decides what it must produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// Climbs out with real `..` components, or is absolute outside the workspace:
    /// every tool must refuse it as access denied.
    Escape,
    /// Goes through a symlink that leads out: every tool but `file_delete` (which
    /// removes a link itself) must refuse it.
    LinkOut,
    /// Anything else (look-alikes, NUL bytes, long names, inside links): any refusal or
    /// success is fine, as long as nothing outside is read or touched.
    Other,
}

struct Fixture {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    root: PathBuf,
    ws: PathBuf,
}

impl Fixture {
    fn write(&self, rel: &str, content: &str) {
        let p = self.ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

/// The workspace, its links in and out, and the tree outside with the canary.
///
/// On tmpfs when the machine has one: thousands of successful writes each fsync, which
/// on a disk would only make the test slow.
fn fixture() -> Fixture {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(root.join("data")).unwrap();
    let ctx = ToolContext::builder()
        .workspace(&ws)
        .data_dir(root.join("data"))
        .build();
    let fx = Fixture {
        _dir: dir,
        ctx,
        root: root.clone(),
        ws: ws.clone(),
    };
    let out = root.join("outside");
    std::fs::create_dir_all(out.join("dir")).unwrap();
    std::fs::create_dir_all(out.join("empty_dir")).unwrap();
    std::fs::write(out.join("canary.txt"), canary()).unwrap();
    std::fs::write(out.join("dir/inner.txt"), canary()).unwrap();
    std::fs::set_permissions(
        out.join("dir/inner.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(root.join("data/canary.txt"), canary()).unwrap();
    std::fs::write(root.join("canary.txt"), canary()).unwrap();

    fx.write("inside.txt", "inside\n");
    fx.write("sub/file.txt", "sub file\n");
    fx.write("sub/deeper/x.txt", "x\n");
    let link = |target: &Path, name: &str| symlink(target, ws.join(name)).unwrap();
    link(&out, "abs_out");
    link(&out.join("canary.txt"), "abs_canary");
    link(Path::new("../outside"), "rel_out");
    link(Path::new("../outside/canary.txt"), "rel_canary");
    link(Path::new("../../outside"), "sub/up2");
    link(Path::new("../inside.txt"), "sub/back_in");
    link(Path::new("chain2"), "chain1");
    link(Path::new("chain3"), "chain2");
    link(Path::new("sub/up2"), "chain3");
    link(Path::new("chain_in2"), "chain_in1");
    link(Path::new("sub"), "chain_in2");
    link(Path::new("/proc/self/root"), "proc");
    link(Path::new("/"), "root_link");
    link(Path::new("/tmp"), "tmp_link");
    link(&ws, "ws_abs");
    link(Path::new("loop2"), "loop1");
    link(Path::new("loop1"), "loop2");
    link(Path::new("../workspace/../outside"), "sneaky_rel");
    link(Path::new("."), "dot");
    fx
}

/// Every file and link outside the workspace, with its bytes (or link target) and mode.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (String, Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p == root.join("workspace") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let mode = meta.permissions().mode();
            if meta.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.insert(
                    rel,
                    ("link".into(), t.into_os_string().into_encoded_bytes(), mode),
                );
            } else if meta.is_dir() {
                out.insert(rel, ("dir".into(), Vec::new(), mode));
                stack.push(p);
            } else {
                out.insert(rel, ("file".into(), std::fs::read(&p).unwrap(), mode));
            }
        }
    }
    out
}

const LINKS_OUT: &[&str] = &[
    "abs_out",
    "abs_canary",
    "rel_out",
    "rel_canary",
    "sub/up2",
    "chain1",
    "chain2",
    "chain3",
    "proc",
    "root_link",
    "tmp_link",
    "ws_abs",
    "sneaky_rel",
];

/// The hostile corpus: at least 10,000 distinct paths.
fn corpus(root: &Path, ws: &Path) -> Vec<(String, Class)> {
    let mut set: BTreeMap<String, Class> = BTreeMap::new();
    let mut add = |p: String, c: Class| {
        // Over PATH_MAX, a refusal as invalid arguments is as good as access denied.
        let c = if p.len() > 4096 { Class::Other } else { c };
        set.entry(p).or_insert(c);
    };
    let r = root.display().to_string();
    let w = ws.display().to_string();

    // `..` in every spelling, at every depth, after many prefixes, towards many targets.
    let real_dots = ["..", "./..", "../."];
    let lookalikes = [
        "%2e%2e",
        "%2E%2E",
        ".%2e",
        "%2e.",
        "%252e%252e",
        "..%2f",
        "..%5c",
        "..\\",
        "...",
        "....",
        "..;",
        "..%00",
        "\u{2025}",
        "\u{FF0E}\u{FF0E}",
        "\u{2024}\u{2024}",
        "..\u{2215}",
        "..\u{2044}",
        "\u{FE52}\u{FE52}",
        ". .",
        ".. ",
        " ..",
        "..\u{200B}",
        "\u{0307}..",
    ];
    let prefixes = [
        "",
        "./",
        "sub/",
        "sub/deeper/",
        "nonexistent/",
        "sub/../",
        "inside.txt/",
        ".//",
        "sub/./deeper/../",
        "dot/",
        "chain_in1/",
        "sub/back_in/",
    ];
    let targets = [
        "outside/canary.txt",
        "outside",
        "outside/dir/inner.txt",
        "outside/new.txt",
        "canary.txt",
        "data/canary.txt",
        "etc/passwd",
        "",
    ];
    for prefix in prefixes {
        let prefix_depth = Path::new(prefix)
            .components()
            .filter(|c| matches!(c, std::path::Component::Normal(_)))
            .count();
        for depth in 1..=8_usize {
            for dots in real_dots {
                for target in targets {
                    let climb = format!("{dots}/").repeat(depth);
                    let p = format!("{prefix}{climb}{target}");
                    let class = if depth > prefix_depth {
                        Class::Escape
                    } else {
                        Class::Other
                    };
                    add(p, class);
                }
            }
            if matches!(depth, 1 | 2 | 8) {
                for dots in lookalikes {
                    for target in targets {
                        let climb = format!("{dots}/").repeat(depth);
                        add(format!("{prefix}{climb}{target}"), Class::Other);
                    }
                    add(
                        format!("{prefix}{}outside/canary.txt", dots.repeat(depth)),
                        Class::Other,
                    );
                }
            }
        }
    }

    // Absolute paths outside, and absolute paths that climb out after the prefix.
    for target in targets {
        add(format!("{r}/{target}"), Class::Escape);
        add(format!("/{target}"), Class::Escape);
        add(format!("//{r}/{target}"), Class::Escape);
        add(format!("/proc/self/root{r}/{target}"), Class::Escape);
        add(format!("/proc/self/cwd/{target}"), Class::Escape);
        add(
            format!("/proc/{}/root{r}/{target}", std::process::id()),
            Class::Escape,
        );
        for depth in 1..=4 {
            let climb = "../".repeat(depth);
            add(format!("{w}/{climb}{target}"), Class::Escape);
            add(format!("{w}//{climb}{target}"), Class::Escape);
            add(format!("{w}/sub/{climb}../{target}"), Class::Escape);
            add(format!("{w}/./{climb}{target}"), Class::Escape);
        }
    }
    for p in [
        "/etc/passwd",
        "/etc/shadow",
        "/proc/self/environ",
        "/proc/self/fd/0",
        "/proc/self/mem",
        "/dev/zero",
        "/dev/null",
        "/",
        "/tmp",
    ] {
        add(p.into(), Class::Escape);
    }
    add(format!("{w}x/inside.txt"), Class::Escape);
    add(
        format!("{w}/../workspace/../outside/canary.txt"),
        Class::Escape,
    );

    // Symlinks that lead out, with every kind of suffix.
    let suffixes = [
        "",
        "/",
        "/canary.txt",
        "/dir/inner.txt",
        "/dir",
        "/new.txt",
        "/new/dir/file.txt",
        "/.",
        "/..",
        "/../outside/canary.txt",
        "/outside/canary.txt",
        &format!("/{}/outside/canary.txt", &r[1..]),
        "/etc/passwd",
        "/./canary.txt",
        "//canary.txt",
    ];
    for link in LINKS_OUT {
        for prefix in ["", "./", "sub/../", "dot/", "dot/dot/"] {
            for suffix in suffixes {
                add(format!("{prefix}{link}{suffix}"), Class::LinkOut);
                add(format!("{w}/{prefix}{link}{suffix}"), Class::LinkOut);
            }
        }
    }

    // NUL bytes, long names, odd characters.
    for base in [
        "inside.txt",
        "../outside/canary.txt",
        "sub/file.txt",
        "abs_out/canary.txt",
    ] {
        for at in [0, 1, base.len() / 2, base.len()] {
            let mut s = base.to_owned();
            s.insert(at, '\0');
            add(s, Class::Other);
        }
        add(format!("{base}\0/../../outside/canary.txt"), Class::Other);
    }
    for n in [254, 255, 256, 300, 1000, 4095, 4096, 4097, 10_000] {
        add("a".repeat(n), Class::Other);
        add(format!("sub/{}", "é".repeat(n / 2)), Class::Other);
        add("a/".repeat(n / 2), Class::Other);
    }
    for n in [1000, 1500, 2100] {
        add("../".repeat(n), Class::Escape);
        add(
            format!("{}outside/canary.txt", "sub/../".repeat(n / 4)),
            Class::Other,
        );
        add(
            format!("{}{}", "sub/".repeat(n / 8), "../".repeat(n / 8 + 1)),
            Class::Escape,
        );
    }
    for odd in [
        "",
        ".",
        "./",
        "~",
        "~/.ssh/id_rsa",
        "$HOME",
        "${HOME}/x",
        "*",
        "?",
        "\n",
        "\r\n",
        "inside.txt\n",
        " inside.txt",
        "inside.txt ",
        "\\..\\..\\outside",
        "C:\\Windows",
        "file:///etc/passwd",
        "loop1",
        "loop1/x",
        "loop2/..",
        "chain_in1/file.txt",
    ] {
        add(odd.into(), Class::Other);
    }
    set.into_iter().collect()
}

/// The passes: each tool, and the legacy tool once per operation, each on a fresh
/// fixture (so one pass's deletions do not hide paths from the next).
const PASSES: usize = 9;

/// The arguments a pass gives for a corpus path (varied by index).
fn call(pass: usize, path: &str, i: usize) -> (&'static str, Value) {
    let mode = if i.is_multiple_of(2) {
        "overwrite"
    } else {
        "append"
    };
    match pass {
        0 => ("file_read", json!({"path": path})),
        1 => (
            "file_list",
            json!({"path": path, "recursive": i.is_multiple_of(3)}),
        ),
        2 => (
            "file_write",
            json!({"path": path, "content": "PWNED", "mode": mode}),
        ),
        3 if i.is_multiple_of(2) => (
            "file_edit",
            json!({"path": path, "oldText": "KLAW-CANARY", "newText": "PWNED"}),
        ),
        3 => (
            "file_edit",
            json!({"path": path, "startLine": 1, "endLine": 1, "newText": "PWNED"}),
        ),
        4 => ("file_delete", json!({"path": path})),
        _ => {
            let op = ["read_file", "write_file", "list_dir", "delete_file"][pass - 5];
            (
                "file",
                json!({"operation": op, "path": path, "content": "PWNED"}),
            )
        }
    }
}

/// Whether `rel` names an entry reached from the workspace through real directories
/// only (no `..`, no symlink on the way), or one removed since.
fn physically_inside(ws: &Path, rel: &str) -> bool {
    let rel = Path::new(rel);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return false;
    }
    let mut at = ws.to_path_buf();
    let n = rel.components().count();
    for (i, c) in rel.components().enumerate() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if i + 1 < n && !m.is_dir() => return false,
            Ok(_) => {}
            Err(_) => return true,
        }
    }
    true
}

/// Whether `e` refuses the path: access denied, or (for a write or delete of a path
/// that ends in `.` or `..`) "not a file path" before anything is touched.
fn refused(e: &klaw_tools::ToolError) -> bool {
    e.is_access_denied()
        || (e.is_invalid_arguments() && e.message().starts_with("/path: not a file path"))
}

fn must_deny(tool: &str, args: &Value, class: Class) -> bool {
    match class {
        Class::Other => false,
        Class::Escape => true,
        // file_delete removes a link itself; the legacy tool forwards to it.
        Class::LinkOut => tool != "file_delete" && args["operation"] != "delete_file",
    }
}

#[test]
fn hostile_corpus_never_escapes_the_workspace() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let registry = Arc::new(ToolRegistry::collect().unwrap());
    let secret = canary();
    let probe = fixture();
    let corpus = corpus(&probe.root, &probe.ws);
    drop(probe);
    assert!(corpus.len() >= 10_000, "corpus has {} paths", corpus.len());
    let mut summary = Vec::new();

    for pass in 0..PASSES {
        let fx = fixture();
        let before = snapshot(&fx.root);
        let ctx = fx.ctx.clone();
        let jobs: Vec<(String, Class, &'static str, Value)> = corpus
            .iter()
            .enumerate()
            .map(|(i, (p, class))| {
                let (tool, args) = call(pass, p, i);
                (p.clone(), *class, tool, args)
            })
            .collect();
        let tool_name = jobs[0].2;
        let started = std::time::Instant::now();
        let results: Vec<_> = rt.block_on(
            futures_util::stream::iter(jobs)
                .map(|(p, class, tool, args)| {
                    let registry = Arc::clone(&registry);
                    let ctx: ToolContext = ctx.clone();
                    async move {
                        let r = registry.execute(&ctx, tool, args.clone()).await;
                        (p, class, tool, args, r)
                    }
                })
                .buffer_unordered(16)
                .collect(),
        );
        let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut failures: BTreeMap<String, usize> = BTreeMap::new();
        let mut bad = BTreeSet::new();
        for (p, class, tool, args, r) in results {
            match &r {
                Ok(out) => {
                    *kinds.entry("ok").or_default() += 1;
                    assert!(
                        !out.text().contains(&secret),
                        "{tool} {p:?} returned the canary"
                    );
                    for entry in out
                        .structured()
                        .and_then(|s| s["entries"].as_array())
                        .into_iter()
                        .flatten()
                    {
                        let rel = entry["path"].as_str().unwrap();
                        assert!(
                            physically_inside(&fx.ws, rel),
                            "{tool} {p:?} listed {rel:?}, not physically in the workspace"
                        );
                        if tool == "file_list" {
                            // No writes in this pass: nothing inside bears these names.
                            assert_ne!(entry["name"], "canary.txt", "{tool} {p:?}");
                            assert_ne!(entry["name"], "inner.txt", "{tool} {p:?}");
                        }
                    }
                    if must_deny(tool, &args, class) {
                        bad.insert(format!("{tool} {p:?} ({class:?}) succeeded"));
                    }
                }
                Err(e) => {
                    *kinds.entry(e.kind().code()).or_default() += 1;
                    if e.kind() == &ErrorKind::Failed {
                        let head = e.message().split(':').next().unwrap_or_default();
                        *failures.entry(head.to_owned()).or_default() += 1;
                    }
                    assert!(!e.message().contains(&secret));
                    assert!(
                        matches!(
                            e.kind(),
                            ErrorKind::AccessDenied
                                | ErrorKind::NotFound
                                | ErrorKind::InvalidArguments { .. }
                                | ErrorKind::Failed
                        ),
                        "{tool} {p:?}: {}",
                        e.to_model_text()
                    );
                    assert!(!e.message().contains("panic"), "{tool} {p:?}: {e}");
                    if must_deny(tool, &args, class) && !refused(e) {
                        bad.insert(format!("{tool} {p:?} ({class:?}): {}", e.to_model_text()));
                    }
                }
            }
        }
        assert!(bad.is_empty(), "{} paths not refused:\n{}", bad.len(), {
            let v: Vec<_> = bad
                .iter()
                .take(30)
                .map(|b| b.chars().take(300).collect::<String>())
                .collect();
            v.join("\n")
        });
        let after = snapshot(&fx.root);
        assert!(
            before == after,
            "{tool_name} changed the tree outside the workspace"
        );
        summary.push(format!(
            "{tool_name} {pass}: {kinds:?} in {:?}; failed: {failures:?}",
            started.elapsed()
        ));
    }
    eprintln!("{} paths per tool\n{}", corpus.len(), summary.join("\n"));
}

#[test]
fn a_symlink_flipped_during_reads_never_yields_outside_content() {
    let fx = fixture();
    let secret = canary();
    let ws = fx.ws.clone();
    let stop = Arc::new(AtomicBool::new(false));
    // The flipper swaps `flip` atomically (a new link renamed over it) between a target
    // inside and one outside.
    let flipper = {
        let stop = Arc::clone(&stop);
        let ws = ws.clone();
        std::thread::spawn(move || {
            let mut n: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                let target = if n.is_multiple_of(2) {
                    PathBuf::from("inside.txt")
                } else {
                    PathBuf::from("../outside/canary.txt")
                };
                let tmp = ws.join(format!(".flip-{n}"));
                symlink(&target, &tmp).unwrap();
                std::fs::rename(&tmp, ws.join("flip")).unwrap();
                // Also flip a directory link used as a parent component.
                let dtarget = if n.is_multiple_of(2) {
                    "sub"
                } else {
                    "../outside/dir"
                };
                let dtmp = ws.join(format!(".flipdir-{n}"));
                symlink(dtarget, &dtmp).unwrap();
                std::fs::rename(&dtmp, ws.join("flipdir")).unwrap();
                n += 1;
            }
            n
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = ToolRegistry::collect().unwrap();
    let (mut inside, mut denied, mut i) = (0_u64, 0_u64, 0_u64);
    rt.block_on(async {
        // Loop until both outcomes have been seen many times (bounded, so a broken
        // flipper fails the test rather than hanging it).
        while (inside < 200 || denied < 200) && i < 2_000_000 {
            i += 1;
            let path = if i % 2 == 0 {
                "flip"
            } else {
                "flipdir/inner.txt"
            };
            match registry
                .execute(&fx.ctx, "file_read", json!({"path": path}))
                .await
            {
                Ok(out) => {
                    assert!(
                        !out.text().contains(&secret),
                        "read {path} returned the canary"
                    );
                    inside += 1;
                }
                Err(e) if e.is_access_denied() => denied += 1,
                Err(e) => assert!(e.is_not_found() || e.kind() == &ErrorKind::Failed, "{e}"),
            }
            // A write through the flipping link must never land outside either.
            if i % 16 == 0 {
                let _ = registry
                    .execute(
                        &fx.ctx,
                        "file_write",
                        json!({"path": "flip", "content": "PWNED"}),
                    )
                    .await;
                let _ = registry
                    .execute(
                        &fx.ctx,
                        "file_write",
                        json!({"path": "flipdir/new.txt", "content": "PWNED"}),
                    )
                    .await;
            }
        }
    });
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    eprintln!("{i} reads, {inside} inside, {denied} denied, {flips} flips");
    assert!(
        inside >= 200 && denied >= 200,
        "{i} reads: {inside} inside, {denied} denied"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("outside/canary.txt")).unwrap(),
        secret
    );
    assert!(!fx.root.join("outside/dir/new.txt").exists());
}
