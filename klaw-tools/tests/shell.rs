//! `exec` and `process` through the registry, as a model calls them, in every sandbox
//! mode that works on this machine. A mode that cannot work here skips with the reason
//! printed; `a_real_sandbox_is_exercised` makes sure at least one real one ran.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use klaw_tools::ToolError;
use klaw_tools::testing::Kit;
use klaw_tools::tools::shell::{SandboxHelper, SandboxMode, SandboxServer, ShellSettings};
use serde_json::{Value, json};

const HELPER: &str = env!("CARGO_BIN_EXE_klaw-sandbox");

fn helper() -> &'static Path {
    Path::new(HELPER)
}

/// A kit whose commands run under `mode`, or `None` (with the reason printed) when that
/// mode does not work on this machine.
fn kit_with(mode: SandboxMode, f: impl FnOnce(ShellSettings) -> ShellSettings) -> Option<Kit> {
    if !works(mode) {
        return None;
    }
    let server = if served() {
        SandboxServer::Always
    } else {
        SandboxServer::Never
    };
    Some(kit_for(
        f(ShellSettings::default()
            .with_sandbox(mode)
            .with_sandbox_server(server)),
        HELPER,
    ))
}

thread_local! {
    /// Whether the test on this thread runs its commands through the sandbox server
    /// (the `*_served` modules), else through a helper per command.
    static SERVED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread's test runs its commands through the sandbox server.
fn served() -> bool {
    SERVED.with(std::cell::Cell::get)
}

/// A kit with these shell settings and sandbox helper.
fn kit_for(shell: ShellSettings, helper: &str) -> Kit {
    Kit::new()
        .unwrap()
        .with_context(|b| b.service(SandboxHelper::new(helper)).service(shell))
}

/// Whether `mode` works on this machine; when it does not, says why, and under CI
/// (`CI=true`, as `.ci/run` sets) fails instead: CI's machine has both sandboxes, so a
/// skip there would hide a broken one.
fn works(mode: SandboxMode) -> bool {
    match klaw_sandbox::describe(mode, Some(helper())) {
        Ok(_) => true,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("sandbox {mode:?} does not work on this CI machine: {why}")
        }
        Err(why) => {
            eprintln!("skipping: sandbox {mode:?} does not work here: {why}");
            false
        }
    }
}

/// The test `name` of this file by its full path in the test binary: `shell::{name}`
/// (this file is a module of `tests/all.rs`), as `--exact` wants it.
fn test_path(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

/// This test binary, re-run to execute one `#[ignore]`d probe (`module::name` or a
/// top-level name, in this file) alone, with its output captured.
fn probe_command(probe: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        &test_path(probe),
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    cmd
}

/// The test module that runs the tests of `mode` (see `per_mode!`).
fn mode_module(mode: SandboxMode) -> &'static str {
    match (mode, served()) {
        (SandboxMode::Landlock, true) => return "landlock_served",
        (SandboxMode::Off, true) => return "off_served",
        (SandboxMode::Bwrap, true) => return "bwrap_served",
        _ => {}
    }
    match mode {
        SandboxMode::Bwrap => "bwrap",
        SandboxMode::Landlock => "landlock",
        SandboxMode::Off => "off",
        SandboxMode::Auto => "auto",
    }
}

fn kit(mode: SandboxMode) -> Option<Kit> {
    kit_with(mode, |s| s)
}

async fn exec(kit: &Kit, args: Value) -> Result<Value, ToolError> {
    kit.call("exec", args)
        .await
        .map(|o| o.structured().cloned().unwrap())
}

async fn process(kit: &Kit, args: Value) -> Result<Value, ToolError> {
    kit.call("process", args)
        .await
        .map(|o| o.structured().cloned().unwrap())
}

/// A number no other test (or earlier run) uses, to tag a process's command line.
fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}{}{:09}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

/// Live (not zombie) processes whose command line contains `needle`, as host pids.
fn live_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && alive(pid) {
            out.push(pid);
        }
    }
    out
}

/// The live process whose command line is exactly `sleep 1000.<tag>` (the grandchild of
/// `setsid_grandchild`; its parents' command lines merely contain the text).
fn grandchild_of(tag: &str) -> Option<i32> {
    let exact = format!("sleep\01000.{tag}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<i32>().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            (cmdline == exact.as_bytes() && alive(pid)).then_some(pid)
        })
        .next()
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            !matches!(state, Some("Z" | "X") | None)
        }
        Err(_) => false,
    }
}

/// Polls (up to a few seconds) until `f` holds.
async fn eventually(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..300 {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A shell line that leaves a grandchild in its own session (`setsid`) sleeping with
/// `tag` in its command line, then waits.
fn setsid_grandchild(tag: &str) -> String {
    format!("setsid sleep 1000.{tag} & sleep 1000.1{tag}")
}

// ---- the checks, run once per working mode ----

async fn timeout_kills_a_setsid_grandchild(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let tag = marker();
    let call = exec(
        &kit,
        json!({"command": setsid_grandchild(&tag), "timeout": 2}),
    );
    let watch = async {
        // Find the grandchild's host pid while the command runs.
        let mut pid = None;
        eventually(|| {
            pid = grandchild_of(&tag);
            pid.is_some()
        })
        .await;
        pid
    };
    let (result, grandchild) = tokio::join!(call, watch);
    let grandchild = grandchild.expect("the grandchild started");
    let e = result.unwrap_err();
    assert!(e.is_timeout(), "{e:?}");
    assert!(
        e.message().starts_with("command timeout after 2 s"),
        "{}",
        e.message()
    );
    assert!(
        eventually(|| !alive(grandchild)).await,
        "grandchild {grandchild} survived the timeout"
    );
    assert!(
        eventually(|| live_with(&tag).is_empty()).await,
        "{:?}",
        live_with(&tag)
    );
}

/// The parent of `pid`, from the host's `/proc`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Starts a `process` job sleeping under a marker and waits until it runs: its job id,
/// the marker, and the ancestors of its command (nearest first) whose command line is
/// the sandbox server's (the served supervisor, then the server).
async fn sleeping_job(kit: &Kit) -> (String, String, Vec<i32>) {
    let tag = marker();
    let r = process(
        kit,
        json!({"action": "start", "command": ["sh", "-c", format!("sleep 1000.{tag}; true")]}),
    )
    .await
    .unwrap();
    let id = r["process"]["processId"].as_str().unwrap().to_owned();
    let mut pid = None;
    assert!(
        eventually(|| {
            pid = live_with(&format!("sleep 1000.{tag}")).into_iter().min();
            pid.is_some()
        })
        .await
    );
    let mut serving = Vec::new();
    let mut at = pid;
    while let Some(p) = at.filter(|p| *p > 1) {
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(klaw_sandbox::SERVE_ARG) {
            serving.push(p);
        }
        at = parent_of(p);
    }
    (id, tag, serving)
}

/// The sandbox server a command of `kit` runs under (its topmost ancestor that is
/// `<helper> __klaw-sandbox-serve`; the supervisor between them is a fork of it, with
/// its command line), found from the host's `/proc` while a `process` job runs.
async fn server_of(kit: &Kit) -> Option<i32> {
    let (id, _, serving) = sleeping_job(kit).await;
    // The outermost: the supervisor between the command and the server carries the
    // server's command line too.
    let server = serving.last().copied();
    process(kit, json!({"action": "kill", "processId": id}))
        .await
        .unwrap();
    server
}

/// A served command runs under the context's sandbox server, and two commands share
/// it; a command of a test that is not served has no server above it. (Without this
/// the served tests could pass through the helper the engine falls back to.)
async fn commands_run_under_the_server(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let first = server_of(&kit).await;
    let second = server_of(&kit).await;
    if served() {
        assert!(first.is_some(), "the command did not run under the server");
        assert_eq!(first, second, "two commands, two servers");
    } else {
        assert_eq!((first, second), (None, None), "a server ran the command");
    }
}

/// A command cannot harm the sandbox server that started it, and through it the
/// commands after it: under Landlock it can neither stop nor kill it (another uid when
/// the engine is root; Landlock's signal scope otherwise), nor trace it, nor read its
/// memory, descriptors or environment (not dumpable; Landlock's ptrace scope; seccomp
/// denies `ptrace`). The server is told by pid, as the host sees it. In mode `off`
/// nothing stops a command (it could end the engine as well): the engine then starts
/// another server, and the next command runs.
async fn the_server_is_out_of_the_commands_reach(mode: SandboxMode) {
    if !served() {
        return;
    }
    let Some(kit) = kit(mode) else { return };
    let server = server_of(&kit).await.expect("a served command");
    let ptrace = match python() {
        Some(py) => format!(
            "{py} -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); \
             print(\"ATTACHED\" if l.ptrace(16, {server}, 0, 0) == 0 else \"ptrace refused\")'; "
        ),
        None => String::new(),
    };
    let line = format!(
        "{ptrace}head -c 1 /proc/{server}/mem >/dev/null 2>&1 && echo READ-MEM; \
         ls /proc/{server}/fd >/dev/null 2>&1 && echo LISTED-FD; \
         head -c 1 /proc/{server}/environ >/dev/null 2>&1 && echo READ-ENV; \
         for s in STOP TERM KILL; do kill -$s {server} 2>/dev/null && echo SIGNALLED-$s; done; \
         echo done"
    );
    let r = exec(&kit, json!({"command": ["sh", "-c", line]}))
        .await
        .unwrap();
    let out = r["stdout"].as_str().unwrap();
    assert!(out.ends_with("done\n"), "{r}");
    if mode == SandboxMode::Off {
        // Unsandboxed: the kill lands; the next command still runs, under a new server.
        assert!(out.contains("SIGNALLED-KILL"), "{r}");
        assert!(eventually(|| !alive(server)).await);
        let again = server_of(&kit).await;
        assert!(
            again.is_some_and(|s| s != server),
            "{again:?} after {server}"
        );
        return;
    }
    for word in ["ATTACHED", "READ-MEM", "LISTED-FD", "READ-ENV", "SIGNALLED"] {
        assert!(!out.contains(word), "{word}: {r}");
    }
    let state = std::fs::read_to_string(format!("/proc/{server}/stat")).unwrap();
    let state = state.rsplit(')').next().unwrap().split_whitespace().next();
    // Neither stopped nor traced (it may be running: reaping the last supervisor).
    assert!(
        matches!(state, Some("S" | "R")),
        "the server is not as before: {state:?}"
    );
    assert_eq!(server_of(&kit).await, Some(server), "the server changed");
}

/// Commands started at once each get their own output and exit code (through one
/// server, their descriptors travel with each request).
async fn concurrent_commands_keep_their_own_output(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let calls = (0..6).map(|i| {
        exec(
            &kit,
            json!({"command": format!("sleep 0.0{i}; echo out-{i}; echo err-{i} >&2; exit {i}")}),
        )
    });
    let results = futures_util::future::join_all(calls).await;
    for (i, r) in results.into_iter().enumerate() {
        let r = r.unwrap();
        assert_eq!(r["stdout"], format!("out-{i}\n"), "{r}");
        assert_eq!(r["stderr"], format!("err-{i}\n"), "{r}");
        assert_eq!(r["exitCode"], i, "{r}");
    }
}

/// A command too long for one message to the server (the served limit is below Linux's
/// 128 KiB per argument) still runs, through a helper of its own.
async fn a_long_command_runs_too(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let long = "k".repeat(100_000);
    let r = exec(
        &kit,
        json!({"command": ["sh", "-c", "printf %s \"$1\" | wc -c", "sh", long]}),
    )
    .await
    .unwrap();
    assert_eq!(r["stdout"].as_str().unwrap().trim(), "100000", "{r}");
}

/// A served command whose supervisor is killed (by `SIGKILL`, which it cannot handle)
/// does not run on: its tree, left to the server (a subreaper), is ended by the server,
/// and the command ends as killed.
async fn a_killed_supervisors_tree_is_ended(mode: SandboxMode) {
    if !served() {
        return;
    }
    let Some(kit) = kit(mode) else { return };
    // The supervisor: the server's child above the command.
    let (id, tag, serving) = sleeping_job(&kit).await;
    let supervisor = serving.iter().rev().nth(1).copied();
    let supervisor = supervisor.expect("a served command has a supervisor");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(supervisor).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    assert!(
        eventually(|| live_with(&format!("1000.{tag}")).is_empty()).await,
        "the command outlived its supervisor: {:?}",
        live_with(&format!("1000.{tag}"))
    );
    let mut ended = Value::Null;
    assert!(
        eventually(|| {
            let status = futures_util::FutureExt::now_or_never(process(
                &kit,
                json!({"action": "status", "processId": id}),
            ));
            if let Some(Ok(s)) = status {
                ended = s;
            }
            ended["process"]["running"] == false
        })
        .await,
        "{ended}"
    );
    assert_eq!(ended["process"]["exitCode"], 137, "{ended}");
}

/// A helper that cannot serve (here: one that exits when asked to) costs nothing but
/// the attempt: the commands run through a helper each, and no server is tried again.
#[tokio::test]
async fn commands_run_when_no_server_can_start() {
    use std::os::unix::fs::PermissionsExt;
    if !works(SandboxMode::Landlock) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("helper");
    let tries = dir.path().join("tries");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = {serve} ]; then echo x >> {tries}; exit 3; fi\nexec {HELPER} \"$@\"\n",
            serve = klaw_sandbox::SERVE_ARG,
            tries = tries.display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let shell = ShellSettings::default()
        .with_sandbox(SandboxMode::Landlock)
        .with_sandbox_server(SandboxServer::Always);
    let kit = kit_for(shell, script.to_str().unwrap());
    for i in 0..3 {
        let r = exec(&kit, json!({"command": format!("echo {i}")}))
            .await
            .unwrap();
        assert_eq!(r["stdout"], format!("{i}\n"), "{r}");
    }
    assert_eq!(server_of(&kit).await, None);
    assert_eq!(
        std::fs::read_to_string(&tries).unwrap(),
        "x\n",
        "tried again"
    );
}

/// A daemon a command leaves (`setsid` and a double fork) is gone by the time the
/// command's result arrives, so before the next command starts: the supervisor ends
/// the tree before it reports the exit (no waiting for it here).
async fn a_daemon_is_gone_before_the_next_command(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let tag = marker();
    let line =
        format!("(setsid sh -c 'sleep 1000.{tag}; true' > /dev/null 2>&1 &); sleep 0.2; echo left");
    let r = exec(&kit, json!({"command": line})).await.unwrap();
    assert_eq!(r["stdout"], "left\n", "{r}");
    let left = live_with(&format!("1000.{tag}"));
    assert!(left.is_empty(), "the daemon outlived its command: {left:?}");
}

async fn leftovers_end_with_the_command(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let tag = marker();
    let r = exec(
        &kit,
        json!({"command": format!("setsid sleep 1000.{tag} > /dev/null 2>&1 & echo started")}),
    )
    .await
    .unwrap();
    assert_eq!(r["stdout"], "started\n", "{r}");
    assert!(
        eventually(|| live_with(&tag).is_empty()).await,
        "a background process outlived its command: {:?}",
        live_with(&tag)
    );
}

async fn an_output_flood_stays_bounded(mode: SandboxMode) {
    let Some(kit) = kit_with(mode, |s| s.with_max_output_bytes(4096)) else {
        return;
    };
    let r = exec(
        &kit,
        json!({"command": "yes klaw | head -c 20000000; echo done >&2"}),
    )
    .await
    .unwrap();
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["truncated"], true);
    let out = r["stdout"].as_str().unwrap();
    assert!(out.len() <= 4096, "{}", out.len());
    assert!(out.ends_with("klaw\n"), "the tail is kept");
    assert_eq!(r["stderr"], "done\n");
}

async fn writes_outside_the_workspace_do_not_land(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let tag = marker();
    let outside = kit.root().join(format!("outside-{tag}"));
    let etc = format!("/etc/klaw-test-{tag}");
    let line = format!(
        "echo x > {o}; echo x > {etc}; echo y > inside.txt; echo end",
        o = outside.display()
    );
    let r = exec(&kit, json!({"command": line})).await.unwrap();
    assert_eq!(r["stdout"], "end\n", "{r}");
    assert!(!outside.exists(), "wrote beside the workspace: {r}");
    assert!(!Path::new(&etc).exists(), "wrote into /etc: {r}");
    assert_eq!(
        kit.read("inside.txt").unwrap(),
        "y\n",
        "the workspace is writable"
    );
}

async fn no_network_unless_allowed(mode: SandboxMode, allowed: bool) {
    let Some(kit) = kit_with(mode, |s| s.with_network(allowed)) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = exec(
        &kit,
        json!({"command": ["bash", "-c", format!("echo hi > /dev/tcp/127.0.0.1/{port}")]}),
    )
    .await
    .unwrap();
    let accepted = listener.accept().is_ok();
    // UDP too (Landlock alone does not cover it; seccomp does).
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let uport = udp.local_addr().unwrap().port();
    let u = exec(
        &kit,
        json!({"command": ["bash", "-c", format!("echo hi > /dev/udp/127.0.0.1/{uport}")]}),
    )
    .await
    .unwrap();
    let mut buf = [0_u8; 16];
    let mut received = udp.recv(&mut buf).is_ok();
    if allowed {
        // Poll briefly: the datagram may still be on its way.
        for _ in 0..100 {
            if received {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            received = udp.recv(&mut buf).is_ok();
        }
        assert!(
            accepted,
            "with the network allowed the listener is reached: {r}"
        );
        assert_eq!(r["success"], true, "{r}");
        assert!(received, "with the network allowed UDP arrives: {u}");
    } else {
        assert!(
            !accepted,
            "a sandboxed command reached 127.0.0.1:{port}: {r}"
        );
        assert_eq!(r["success"], false, "{r}");
        assert!(
            !received,
            "a sandboxed command sent UDP to 127.0.0.1:{uport}: {u}"
        );
        if mode == SandboxMode::Landlock {
            // seccomp refuses the socket itself (under bwrap the datagram just stays in
            // the sandbox's own network namespace).
            assert_eq!(u["success"], false, "{u}");
        }
    }
}

/// The system Python (`python3` on PATH may be a shim under the home directory, which
/// the sandboxes hide), or `None` with the reason printed.
fn python() -> Option<&'static str> {
    const PY: &str = "/usr/bin/python3";
    if Path::new(PY).exists() {
        Some(PY)
    } else {
        eprintln!("skipping: {PY} is not installed");
        None
    }
}

/// A host UNIX socket outside the workspace (here: a listener the test opens in a
/// temporary directory; in real life docker.sock, systemd's or ssh-agent's) cannot be
/// connected to.
async fn host_unix_sockets_are_unreachable(mode: SandboxMode) {
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        "import socket\ntry:\n    s = socket.socket(socket.AF_UNIX)\n    s.connect({p:?})\n    print('connected')\nexcept OSError as e:\n    print('refused', e)",
        p = path.display().to_string()
    );
    let r = exec(&kit, json!({"command": [py, "-c", script]}))
        .await
        .unwrap();
    let out = r["stdout"].as_str().unwrap();
    assert!(out.starts_with("refused"), "{r}");
    assert!(
        listener.accept().is_err(),
        "a sandboxed command reached {}: {r}",
        path.display()
    );
}

/// A command cannot reach the user's terminal: no `/dev/tty`, and no keystrokes pushed
/// with TIOCSTI. The test binary re-runs itself under `script` (a pseudo-terminal as its
/// controlling terminal, as an engine started from a shell has) and checks from there.
async fn the_terminal_is_out_of_reach(mode: SandboxMode) {
    if python().is_none() || !works(mode) {
        return;
    }
    if !Path::new("/usr/bin/script").exists() {
        eprintln!("skipping: /usr/bin/script is not installed");
        return;
    }
    let name = test_path(match mode {
        SandboxMode::Bwrap => "bwrap_boundary::terminal_probe",
        _ => "landlock_boundary::terminal_probe",
    });
    let exe = std::env::current_exe().unwrap();
    let line = format!(
        "'{}' {name} --exact --ignored --nocapture --test-threads=1",
        exe.display()
    );
    let out = std::process::Command::new("/usr/bin/script")
        .args(["-qec", &line, "/dev/null"])
        .env("KLAW_TEST_TTY_PROBE", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("1 passed") && stdout.contains("terminal probe ran"),
        "the probe did not run: {stdout}"
    );
}

async fn terminal_probe(mode: SandboxMode) {
    if std::env::var_os("KLAW_TEST_TTY_PROBE").is_none() {
        return; // only meaningful when started by `the_terminal_is_out_of_reach`
    }
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else { return };
    // The test itself has a controlling terminal, so the check below can fail.
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .expect("the probe runs with a controlling terminal");
    let script = "import os, fcntl, termios\n\
        try:\n    fd = os.open('/dev/tty', os.O_RDWR)\n    print('tty-opened')\n    \
        fcntl.ioctl(fd, termios.TIOCSTI, b'#')\n    print('injected')\n\
        except OSError as e:\n    print('tty-refused', e.errno)\n\
        try:\n    fcntl.ioctl(0, termios.TIOCSTI, b'#')\n    print('injected0')\n\
        except OSError as e:\n    print('sti-refused', e.errno)\n";
    let r = exec(&kit, json!({"command": [py, "-c", script]}))
        .await
        .unwrap();
    let out = r["stdout"].as_str().unwrap();
    assert!(out.contains("tty-refused"), "{r}");
    assert!(
        !out.contains("tty-opened") && !out.contains("injected"),
        "{r}"
    );
    if mode == SandboxMode::Landlock {
        // seccomp answers before the kernel looks at the file (EPERM, not ENOTTY).
        assert!(out.contains("sti-refused 1\n"), "{r}");
    }
    eprintln!("terminal probe ran");
}

/// No new namespaces through clone(2) (unshare(2) is the obvious way, also denied),
/// while fork and threads keep working.
async fn no_namespaces_through_clone(mode: SandboxMode) {
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else { return };
    // clone(CLONE_NEWUSER | SIGCHLD) and clone(CLONE_NEWNET | CLONE_NEWNS | SIGCHLD);
    // a child that did start exits at once.
    let script = "import ctypes, os\n\
        libc = ctypes.CDLL(None)\n\
        for flags in (0x10000000 | 17, 0x40000000 | 0x20000 | 17):\n    \
        r = libc.syscall(56, flags, 0, 0, 0, 0)\n    \
        if r == 0:\n        os._exit(0)\n    \
        print(r)\n";
    let r = exec(&kit, json!({"command": [py, "-c", script]}))
        .await
        .unwrap();
    assert_eq!(r["stdout"], "-1\n-1\n", "{r}");
    let threads = "import threading, os\n\
        t = threading.Thread(target=print, args=('thread',))\nt.start()\nt.join()\n\
        pid = os.fork()\n\
        if pid == 0:\n    os._exit(7)\n\
        print('child', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n";
    let r = exec(&kit, json!({"command": [py, "-c", threads]}))
        .await
        .unwrap();
    assert_eq!(r["stdout"], "thread\nchild 7\n", "{r}");
}

/// The x32 ABI's numbers (bit 30 set) reach no call the filter denies: `ptrace` and
/// `unshare` through them fail, whether the kernel runs x32 calls (then the filter has
/// the x32 rules) or not (then the kernel answers ENOSYS, and the filter leaves them
/// out, which halves it). On a kernel without x32 this holds either way.
async fn x32_calls_are_refused(mode: SandboxMode) {
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else { return };
    // x32 ptrace(PTRACE_TRACEME) is 521, x32 unshare(CLONE_NEWUSER) 272.
    let script = "import ctypes\n\
        libc = ctypes.CDLL(None)\n\
        print(libc.syscall(0x40000000 | 521, 0, 0, 0, 0), libc.syscall(0x40000000 | 272, 0x10000000))\n";
    let r = exec(&kit, json!({"command": [py, "-c", script]}))
        .await
        .unwrap();
    assert_eq!(r["stdout"], "-1 -1\n", "{r}");
}

/// A command cannot change the resource limits or the priority of another process of
/// the same user (here the test process, standing in for the engine).
async fn other_processes_limits_are_out_of_reach(mode: SandboxMode) {
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else { return };
    let limits = || {
        std::fs::read_to_string("/proc/self/limits")
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("Max open files") || l.starts_with("Max cpu time"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let priority = || {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        stat.rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .nth(16)
            .unwrap()
            .to_owned()
    };
    let (before, nice_before) = (limits(), priority());
    let me = std::process::id();
    let line = format!(
        "prlimit --pid {me} --nofile=1:1 && echo limited; \
         {py} -c 'import os; os.setpriority(os.PRIO_PROCESS, {me}, 19); print(\"reniced-test\")'; \
         {py} -c 'import os; os.setpriority(os.PRIO_USER, 0, 19); print(\"reniced-user\")'; \
         ulimit -n 64 && echo own-limit"
    );
    let r = exec(&kit, json!({"command": line})).await.unwrap();
    assert_eq!(limits(), before, "the test's limits changed: {r}");
    assert_eq!(priority(), nice_before, "the test's priority changed: {r}");
    let out = r["stdout"].as_str().unwrap();
    assert!(
        !out.contains("limited") && !out.contains("reniced-test"),
        "{r}"
    );
    if mode == SandboxMode::Landlock {
        // Under bubblewrap "every process of this user" means those in its PID namespace.
        assert!(!out.contains("reniced-user"), "{r}");
    }
    assert!(
        out.contains("own-limit"),
        "a command still sets its own limits: {r}"
    );
}

async fn the_data_dir_and_home_are_not_visible(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let secret = format!("secret-{}", marker());
    let file = kit.data_dir().join("core_memory.json");
    std::fs::write(&file, &secret).unwrap();
    let r = exec(&kit, json!({"command": format!("cat {}", file.display())}))
        .await
        .unwrap();
    assert_eq!(r["success"], false, "{r}");
    assert!(!r.to_string().contains(&secret), "{r}");
    // The user's home (outside the system directories) is not listable either.
    if let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from)
        && home.is_dir()
        && (home.starts_with("/root") || home.starts_with("/home"))
    {
        let r = exec(&kit, json!({"command": ["ls", "-A", home]}))
            .await
            .unwrap();
        assert_eq!(r["success"], false, "home is visible: {r}");
    }
}

/// A skill's bundled scripts run from every folder a skill comes from (issue 46): a
/// system skill in the data dir, a user one in `~/.agents/skills` and a workspace one.
/// `skill_load` gives the folder as commands see it (`skillDir`, and the workspace's
/// `execDir`), and a real Python and shell script run by it. Outside the workspace the
/// folder is read-only (the kernel refuses every write) and leads nowhere else: neither
/// `..` nor a link in it reaches the rest of the data dir.
async fn a_skill_s_scripts_run_from_every_folder(mode: SandboxMode) {
    #[cfg(feature = "skills")]
    skill_scripts_run_from_every_folder(mode).await;
    #[cfg(not(feature = "skills"))]
    let _ = mode;
}

/// A `skills.paths` folder inside the workspace (a relative entry is relative to the
/// workspace) that a command replaced with a symbolic link to a folder outside it (or
/// one of whose parents it replaced so): the next command was shown that folder
/// read-only (the data dir's files; as root, through the idmapped mount, `/etc/shadow`).
/// Such a folder is never shown apart from the workspace now, and `/etc` and the like
/// never at all.
async fn a_skills_path_in_the_workspace_cannot_be_linked_out(mode: SandboxMode) {
    #[cfg(feature = "skills")]
    skills_path_cannot_be_linked_out(mode).await;
    #[cfg(not(feature = "skills"))]
    let _ = mode;
}

#[cfg(feature = "skills")]
async fn skills_path_cannot_be_linked_out(mode: SandboxMode) {
    use klaw_tools::tools::skills::SkillsSettings;
    use std::os::unix::fs::PermissionsExt;
    let Some(kit) = kit(mode) else { return };
    let ws = kit.workspace().to_path_buf();
    let kit = kit.with_context(|b| {
        b.service(
            SkillsSettings::default().with_paths(vec![ws.join("my-skills"), ws.join("a/skills")]),
        )
    });
    let secret = format!("secret-{}", marker());
    let private = kit.data_dir().join("private");
    std::fs::create_dir_all(private.join("skills")).unwrap();
    for file in [private.join("token"), private.join("skills/token")] {
        std::fs::write(&file, &secret).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let cat = format!(
        "cat {0}/token {0}/skills/token 2>/dev/null; true",
        private.display()
    );
    let r = exec(&kit, json!({"command": cat})).await.unwrap();
    assert!(!r.to_string().contains(&secret), "{mode:?}: {r}");
    // The entry itself a link, and a parent of the other one.
    let link = format!(
        "ln -s {0} my-skills && ln -s {0} a && echo linked",
        private.display()
    );
    let r = exec(&kit, json!({"command": link})).await.unwrap();
    assert_eq!(r["stdout"], "linked\n", "{mode:?}: {r}");
    let r = exec(&kit, json!({"command": cat})).await.unwrap();
    assert!(!r.to_string().contains(&secret), "{mode:?}: {r}");
    // As root (the commands run as an unprivileged user through an idmapped mount),
    // `/etc` shown so would give away `/etc/shadow`.
    let r = exec(
        &kit,
        json!({"command": "rm my-skills a && ln -s /etc my-skills && ln -s / a && echo linked"}),
    )
    .await
    .unwrap();
    assert_eq!(r["stdout"], "linked\n", "{mode:?}: {r}");
    let r = exec(
        &kit,
        json!({"command": "head -c 64 /etc/shadow 2>/dev/null | grep -c : ; true"}),
    )
    .await
    .unwrap();
    assert_eq!(r["stdout"], "0\n", "{mode:?}: /etc/shadow was read: {r}");
}

#[cfg(feature = "skills")]
async fn skill_scripts_run_from_every_folder(mode: SandboxMode) {
    use klaw_tools::tools::skills::SkillsSettings;
    let Some(kit) = kit(mode) else { return };
    let home = kit.root().join("home");
    let kit =
        kit.with_context(|b| b.service(SkillsSettings::default().with_home(Some(home.clone()))));
    let skill = |dir: &Path, name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(d.join("scripts")).unwrap();
        std::fs::write(
            d.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: Greets.\n---\nRun `python3 scripts/hello.py NAME`.\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("scripts/hello.py"),
            "import sys, pathlib\nhere = pathlib.Path(__file__).resolve().parent.parent\nprint('hello', sys.argv[1], (here / 'SKILL.md').exists())\n",
        )
        .unwrap();
        std::fs::write(
            d.join("scripts/hello.sh"),
            "echo \"sh $1 $(basename \"$(dirname \"$0\")\")\"\n",
        )
        .unwrap();
        d
    };
    let secret = format!("secret-{}", marker());
    std::fs::write(kit.data_dir().join("memory.sqlite"), &secret).unwrap();
    let system = skill(&kit.data_dir().join("skills"), "sys-hello");
    std::os::unix::fs::symlink("../../memory.sqlite", system.join("db")).unwrap();
    skill(&home.join(".agents/skills"), "user-hello");
    skill(&kit.workspace().join("skills"), "ws-hello");

    let load = |name: &'static str| {
        let kit = &kit;
        async move {
            kit.call("skill_load", json!({"name": name}))
                .await
                .unwrap()
                .structured()
                .cloned()
                .unwrap()
        }
    };
    let run = |command: String, dir: Option<&str>| {
        let mut args = json!({"command": command});
        if let Some(d) = dir {
            args["workingDir"] = json!(d);
        }
        let kit = &kit;
        async move { exec(kit, args).await.unwrap() }
    };
    for (name, origin) in [("sys-hello", "system"), ("user-hello", "user")] {
        let loaded = load(name).await;
        assert_eq!(loaded["origin"], origin, "{loaded}");
        assert!(loaded.get("execDir").is_none(), "{loaded}");
        let dir = loaded["skillDir"].as_str().unwrap().to_owned();
        assert!(
            loaded["howToReadFiles"]
                .as_str()
                .unwrap()
                .contains(&format!("read-only at `{dir}`")),
            "{loaded}"
        );
        let r = run(format!("python3 {dir}/scripts/hello.py world"), None).await;
        assert_eq!(r["exitCode"], 0, "{mode:?} {name}: {r}");
        assert_eq!(r["stdout"], "hello world True\n", "{mode:?} {name}: {r}");
        let r = run(format!("sh {dir}/scripts/hello.sh there"), None).await;
        assert_eq!(r["stdout"], "sh there scripts\n", "{mode:?} {name}: {r}");
    }
    let loaded = load("ws-hello").await;
    assert_eq!(loaded["execDir"], "skills/ws-hello", "{loaded}");
    let r = run(
        "python3 scripts/hello.py world".into(),
        Some("skills/ws-hello"),
    )
    .await;
    assert_eq!(r["stdout"], "hello world True\n", "{mode:?}: {r}");
    let dir = loaded["skillDir"].as_str().unwrap().to_owned();
    let r = run(format!("python3 {dir}/scripts/hello.py there"), None).await;
    assert_eq!(r["stdout"], "hello there True\n", "{mode:?}: {r}");

    // The system skill's folder: nothing written, nothing of the data dir beside it.
    let dir = load("sys-hello").await["skillDir"]
        .as_str()
        .unwrap()
        .to_owned();
    for write in [
        format!("echo x > {dir}/scripts/new.txt"),
        format!("echo x >> {dir}/SKILL.md"),
        format!("rm -f {dir}/scripts/hello.py"),
        format!("mkdir {dir}/made"),
        format!("touch {dir}/../planted"),
        format!("chmod 777 {dir}/scripts/hello.sh"),
        format!("ln -s /etc/passwd {dir}/link"),
    ] {
        // Landlock does not cover metadata: with an engine that is not root (whose user
        // owns the folder) `chmod` goes through there, a known limit (doc/security.md).
        if write.starts_with("chmod")
            && matches!(mode, SandboxMode::Landlock)
            && !rustix::process::geteuid().is_root()
        {
            continue;
        }
        let r = run(write.clone(), None).await;
        assert_ne!(r["exitCode"], 0, "{mode:?} `{write}` went through: {r}");
    }
    assert!(!system.join("scripts/new.txt").exists());
    assert!(!system.join("made").exists() && !system.join("link").exists());
    assert!(!system.parent().unwrap().join("planted").exists());
    assert!(system.join("scripts/hello.py").exists());
    assert!(
        std::fs::read_to_string(system.join("SKILL.md"))
            .unwrap()
            .ends_with("NAME`.\n")
    );
    for read in [
        format!("cat {dir}/db"),
        format!("cat {dir}/../../memory.sqlite"),
        format!("cd {dir} && cat ../../memory.sqlite"),
        format!("ls -a {dir}/../.. {dir}/.."),
    ] {
        let r = run(read.clone(), None).await;
        assert!(
            !r.to_string().contains(&secret) && !r["stdout"].to_string().contains("memory"),
            "{mode:?} `{read}` reached the data dir: {r}"
        );
    }
}

/// Descriptors the engine inherited without close-on-exec (here: one on a file in the
/// data dir and one on a file outside everything, as a parent process could leave them)
/// do not reach the command: it can neither read the first nor write the second.
async fn inherited_descriptors_do_not_reach_the_command(mode: SandboxMode) {
    use std::os::fd::AsRawFd;
    let Some(kit) = kit(mode) else { return };
    let secret = format!("secret-{}", marker());
    let inside = kit.data_dir().join("inherited-secret.txt");
    std::fs::write(&inside, &secret).unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    let read = std::fs::File::open(&inside).unwrap();
    let write = std::fs::OpenOptions::new()
        .append(true)
        .open(outside.path())
        .unwrap();
    for f in [&read, &write] {
        rustix::io::fcntl_setfd(f, rustix::io::FdFlags::empty()).unwrap();
    }
    let line = format!(
        "cat <&{r}; echo escaped >&{w}; ls /proc/self/fd",
        r = read.as_raw_fd(),
        w = write.as_raw_fd()
    );
    let r = exec(&kit, json!({"command": ["bash", "-c", line]}))
        .await
        .unwrap();
    assert!(!r.to_string().contains(&secret), "read through fd: {r}");
    assert_eq!(
        std::fs::read_to_string(outside.path()).unwrap(),
        "",
        "wrote through fd: {r}"
    );
    // stdin, stdout, stderr and the descriptor `ls` opens on the directory itself.
    let fds: Vec<&str> = r["stdout"].as_str().unwrap().lines().collect();
    assert!(
        fds.len() <= 4,
        "descriptors open in the command: {fds:?} ({r})"
    );
}

/// The host's sysctls stay read-only (a command as root could otherwise set
/// `kernel.core_pattern` to a program the kernel runs as host root), and kernel memory
/// and keyrings are not readable. The write puts back the value already there.
async fn proc_sys_is_read_only(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let line = "v=$(cat /proc/sys/vm/swappiness) && echo \"$v\" > /proc/sys/vm/swappiness && echo WROTE-SYSCTL; \
                echo \"$(cat /proc/sys/kernel/core_pattern)\" > /proc/sys/kernel/core_pattern && echo WROTE-CORE; \
                echo h > /proc/sysrq-trigger && echo WROTE-SYSRQ; \
                head -c 16 /proc/kcore 2>/dev/null | wc -c; \
                cat /proc/keys 2>/dev/null | wc -c; \
                cat /proc/sys/kernel/ostype";
    let r = exec(&kit, json!({"command": line})).await.unwrap();
    let out = r["stdout"].as_str().unwrap();
    assert!(!out.contains("WROTE"), "{r}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{r}");
    assert_eq!(lines[0], "0", "kernel memory readable: {r}");
    assert_eq!(lines[2], "Linux", "sysctls unreadable: {r}");
    // Landlock allows reading /proc as a whole, so the keys the command's user may view
    // stay listed there (their descriptions; keyctl is denied): none when the engine is
    // root, as the command then runs as a user with no keys. doc/security.md says so.
    if mode == SandboxMode::Bwrap || rustix::process::geteuid().is_root() {
        assert_eq!(lines[1], "0", "/proc/keys readable: {r}");
    }
}

/// A command never runs as the kernel's root, even when the engine does (as CI runs
/// it): as root without capabilities it would still pass every owner check on root's
/// files — read `/etc/shadow`, write root-owned files, own whatever it makes. When the
/// engine is root the host must see the command under another uid, while the workspace
/// stays writable and what the command makes there belongs to the workspace's owner.
async fn commands_never_run_as_root(mode: SandboxMode) {
    use std::os::unix::fs::MetadataExt;
    let Some(kit) = kit(mode) else { return };
    let ws = kit.workspace();
    std::fs::write(ws.join("owned.txt"), "x\n").unwrap();
    let line = "head -c 1 /etc/shadow >/dev/null 2>&1 && echo SHADOW-READ; \
                echo y >> owned.txt && echo > made.txt && mkdir dir && echo wrote";
    let r = exec(&kit, json!({"command": line})).await.unwrap();
    assert_eq!(r["stdout"], "wrote\n", "{r}");
    let owner = std::fs::metadata(ws).unwrap();
    for made in ["made.txt", "dir"] {
        let m = std::fs::metadata(ws.join(made)).unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            (owner.uid(), owner.gid()),
            "{made}: {r}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("owned.txt")).unwrap(),
        "x\ny\n"
    );
    // The uid the host sees, read from the host's /proc while the command runs.
    let tag = marker();
    let sleeper = format!("sleep 1000.{tag}");
    let r = process(
        &kit,
        json!({"action": "start", "command": ["sh", "-c", format!("{sleeper}; true")]}),
    )
    .await
    .unwrap();
    let id = r["process"]["processId"].as_str().unwrap().to_owned();
    let is_sleeper = |p: &i32| {
        std::fs::read_to_string(format!("/proc/{p}/cmdline"))
            .is_ok_and(|c| c.trim_end_matches('\0') == format!("sleep\01000.{tag}"))
    };
    let mut pid = None;
    assert!(
        eventually(|| {
            pid = live_with(&sleeper).into_iter().find(is_sleeper);
            pid.is_some()
        })
        .await,
        "the command never showed up"
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.unwrap())).unwrap();
    process(&kit, json!({"action": "kill", "processId": id}))
        .await
        .unwrap();
    let uids = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    let uids: Vec<u32> = uids[4..]
        .split_whitespace()
        .map(|u| u.parse().unwrap())
        .collect();
    assert!(
        uids.iter().all(|&u| u != 0),
        "the command runs as root: {uids:?}"
    );
    eprintln!("{mode:?}: the host sees the command as uid {uids:?}");
    if !rustix::process::geteuid().is_root() {
        eprintln!("(not root: the uid check above is trivial here; CI runs it as root)");
    }
}

/// The command cannot end the process that supervises it: under Landlock the helper
/// stays outside the command's domain (and, as root, its uid), so `kill -9 $PPID`
/// fails, the call ends normally, and a `setsid` loop the command left is ended with
/// it (before, killing the helper ended the call while the loop ran on, re-parented
/// and without a time limit). Under bubblewrap the command is PID 1 and its supervisor
/// is outside its PID namespace altogether.
async fn the_command_cannot_end_its_supervisor(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let line = "setsid sh -c 'while :; do echo x >> escaped.log; sleep 0.05; done' & \
                sleep 0.3; if [ \"$PPID\" -gt 1 ]; then kill -9 $PPID || echo refused; fi; \
                sleep 0.2; echo survived";
    let r = exec(&kit, json!({"command": ["bash", "-c", line]}))
        .await
        .unwrap();
    assert!(r["stdout"].as_str().unwrap().ends_with("survived\n"), "{r}");
    let log = kit.workspace().join("escaped.log");
    let size = || std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let before = size();
    assert!(before > 0, "the loop never ran: {r}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(size(), before, "the loop outlived the call: {r}");
}

/// A process that keeps moving to a new PID (`setsid`, fork, the parent exits, in a
/// loop) is ended with the call, both when the command ends normally and on timeout:
/// under bubblewrap and, with the engine as root, under Landlock the command is PID 1 of
/// its own PID namespace, which the kernel empties when it dies. Elsewhere the
/// supervisor's walk may lose the race, and then the result must say so. (On the
/// machine this was written on the walk happened to win against this hopper too; the
/// PID 1 check is what fails without the namespace.)
async fn a_pid_hopper_is_ended(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    // In C, so that each generation lives as briefly as a fork allows (a Python one is
    // slow enough for a `/proc` walk to catch).
    let source = kit.workspace().join("hop.c");
    std::fs::write(
        &source,
        "#include <unistd.h>\n#include <fcntl.h>\n\
         int main(void) { for (unsigned long n = 0;; n++) { if (fork() != 0) _exit(0); setsid();\n\
         if (n % 2000 == 0) { int fd = open(\"hop.log\", O_WRONLY | O_APPEND | O_CREAT, 0644);\n\
         if (fd >= 0) { write(fd, \"x\", 1); close(fd); } } } }\n",
    )
    .unwrap();
    let built = std::process::Command::new("cc")
        .args(["-O2", "-o", "hop", "hop.c"])
        .current_dir(kit.workspace())
        .status();
    if !built.is_ok_and(|s| s.success()) {
        eprintln!("skipping: no C compiler (cc) to build the hopper");
        return;
    }
    // Where a PID namespace is possible (bubblewrap; Landlock with the engine as root),
    // the command is its PID 1.
    if mode == SandboxMode::Bwrap || rustix::process::geteuid().is_root() {
        let r = exec(&kit, json!({"command": "echo $$"})).await.unwrap();
        assert_eq!(r["stdout"], "1\n", "not PID 1 of its own namespace: {r}");
    }
    let log = kit.workspace().join("hop.log");
    let size = || std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let settled = || async {
        let before = size();
        tokio::time::sleep(Duration::from_millis(400)).await;
        before > 0 && size() == before
    };
    // A normal end: the hopper is left behind.
    let line = "./hop & sleep 0.5; echo started";
    let r = exec(&kit, json!({"command": line})).await.unwrap();
    let unproven = |text: &str| text.contains("could not prove");
    if !settled().await {
        assert!(
            unproven(&r.to_string()),
            "the hopper outlived the call: {r}"
        );
    }
    // A timeout: the hopper in the foreground.
    std::fs::remove_file(&log).ok();
    let line = "./hop; sleep 30";
    let e = exec(&kit, json!({"command": line, "timeout": 1}))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &klaw_tools::ErrorKind::Timeout, "{e:?}");
    if !settled().await {
        assert!(
            unproven(e.message()),
            "the hopper outlived the timeout: {e:?}"
        );
    }
}

/// A command's program starts as before the helper started it itself under Landlock
/// (sharing its memory until `exec`): through `execvp`'s rules there (and under
/// bubblewrap), so a file without `#!` runs under `/bin/sh`, 127 for a missing program
/// and 126 for one that cannot run (a one-shot bubblewrap answers 1 for both, its kept
/// sandbox as the helper does; mode `off` 126 for a file without `#!`); and in every mode the command starts with no signal blocked, and
/// `SIGPIPE`, which Rust programs ignore, back to its default.
async fn a_program_starts_as_execvp_starts_it(mode: SandboxMode) {
    use std::os::unix::fs::PermissionsExt;
    let Some(kit) = kit(mode) else { return };
    let ws = kit.workspace();
    std::fs::write(ws.join("plain.txt"), "echo never\n").unwrap();
    let script = ws.join("script");
    std::fs::write(&script, "echo from-sh \"$1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = async |argv: &[&str]| exec(&kit, json!({ "command": argv })).await.unwrap();
    let missing = run(&["./no-such-program", "x"]).await;
    let bwrap = missing["sandbox"] == "bwrap" && !served();
    assert_eq!(
        missing["exitCode"],
        if bwrap { 1 } else { 127 },
        "{missing}"
    );
    let cannot = run(&["./plain.txt"]).await;
    assert_eq!(cannot["exitCode"], if bwrap { 1 } else { 126 }, "{cannot}");
    let by_sh = run(&["./script", "a b"]).await;
    if mode == SandboxMode::Off {
        assert_eq!(by_sh["exitCode"], 126, "{by_sh}");
    } else {
        assert_eq!(by_sh["stdout"], "from-sh a b\n", "{by_sh}");
    }
    let signals = run(&["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]).await;
    let mask = |name: &str| {
        let line = signals["stdout"]
            .as_str()
            .unwrap()
            .lines()
            .find(|l| l.starts_with(name));
        u64::from_str_radix(line.unwrap()[name.len()..].trim(), 16).unwrap()
    };
    assert_eq!(mask("SigBlk:"), 0, "{signals}");
    let sigpipe = 1 << (13 - 1); // SIGPIPE
    assert_eq!(mask("SigIgn:") & sigpipe, 0, "{signals}");
}

async fn non_zero_exit_is_a_normal_result(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    std::fs::create_dir(kit.workspace().join("sub")).unwrap();
    let r = exec(
        &kit,
        json!({"command": "echo out; echo err >&2; pwd; exit 3", "workingDir": "sub"}),
    )
    .await
    .unwrap();
    assert_eq!(r["success"], false);
    assert_eq!(r["exitCode"], 3);
    let ws = std::fs::canonicalize(kit.workspace()).unwrap();
    assert_eq!(
        r["stdout"],
        format!("out\n{}\n", ws.join("sub").display()),
        "{r}"
    );
    assert_eq!(r["stderr"], "err\n");
    assert_eq!(r["workingDir"], ws.join("sub").display().to_string());
    let expected = match mode {
        SandboxMode::Off => "off",
        SandboxMode::Bwrap => "bwrap",
        SandboxMode::Landlock => "landlock",
        SandboxMode::Auto => r["sandbox"].as_str().unwrap(),
    };
    assert_eq!(r["sandbox"], expected);
    let ok = exec(&kit, json!({"command": ["true"]})).await.unwrap();
    assert_eq!(ok["success"], true);
    assert_eq!(ok["exitCode"], 0);
}

async fn the_deny_list_answers_first(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    for bad in [
        json!("sudo rm -rf /tmp/x"),
        json!("rm -rf /"),
        json!(":(){ :|:& };:"),
        json!(["mkfs.ext4", "/dev/sda"]),
    ] {
        let e = exec(&kit, json!({"command": bad})).await.unwrap_err();
        assert!(e.is_access_denied(), "{bad}: {e:?}");
        assert!(e.message().starts_with("refused:"), "{}", e.message());
    }
}

async fn the_environment_does_not_leak(mode: SandboxMode) {
    // `std::env::set_var` is unsafe (and unsafe code is forbidden): re-run this test
    // binary with a secret in its environment and let the child do the check.
    let out = probe_command(&format!("{}::environment_probe", mode_module(mode)))
        .env("KLAW_TEST_SECRET_API_KEY", "sk-do-not-leak-0123")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed")
            && (stderr.contains("environment probe ran") || stderr.contains("skipping")),
        "the probe did not run: {stdout}\n{stderr}"
    );
}

async fn environment_probe(mode: SandboxMode) {
    let Ok(secret) = std::env::var("KLAW_TEST_SECRET_API_KEY") else {
        return; // only meaningful when started by `the_environment_does_not_leak`
    };
    let Some(kit) = kit(mode) else { return };
    let r = exec(
        &kit,
        json!({"command": "env; echo \"[$KLAW_TEST_SECRET_API_KEY]\""}),
    )
    .await
    .unwrap();
    let out = r["stdout"].as_str().unwrap();
    assert!(out.contains("PATH="), "{out}");
    assert!(out.contains("[]"), "{out}");
    assert!(!out.contains(&secret), "{out}");
    assert!(!out.contains("KLAW_TEST_SECRET"), "{out}");
    eprintln!("environment probe ran");
}

/// When the engine is killed outright (SIGKILL: no drop, no cleanup), the command's whole
/// tree still ends. The engine here is a child copy of this test binary that starts a
/// job and waits; the test kills it.
async fn the_tree_dies_with_the_engine(mode: SandboxMode) {
    if !works(mode) {
        return;
    }
    let tag = marker();
    let mut engine = probe_command(&format!("{}::engine_probe", mode_module(mode)))
        .env("KLAW_TEST_ENGINE_TAG", &tag)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = eventually(|| grandchild_of(&tag).is_some()).await;
    engine.kill().unwrap(); // SIGKILL
    engine.wait().unwrap();
    assert!(started, "the engine's job did not start");
    assert!(
        eventually(|| live_with(&tag).is_empty()).await,
        "the tree outlived the engine: {:?}",
        live_with(&tag)
    );
}

async fn engine_probe(mode: SandboxMode) {
    let Ok(tag) = std::env::var("KLAW_TEST_ENGINE_TAG") else {
        return; // only meaningful when started by `the_tree_dies_with_the_engine`
    };
    let Some(kit) = kit(mode) else { return };
    process(
        &kit,
        json!({"action": "start", "command": setsid_grandchild(&tag)}),
    )
    .await
    .unwrap();
    // Wait to be killed.
    tokio::time::sleep(Duration::from_secs(600)).await;
}

// ---- code_execute: exec's sandbox, with the code as the argument ----

async fn code_execute(kit: &Kit, args: Value) -> Result<Value, ToolError> {
    kit.call("code_execute", args)
        .await
        .map(|o| o.structured().cloned().unwrap())
}

/// Python, bash, sh and node code runs (node and python where the system has them),
/// stdin reaches it, a non-zero exit is a normal result.
async fn code_execute_runs_code(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    if python().is_some() {
        let r = code_execute(
            &kit,
            json!({"language": "python", "code": "import sys\nprint(sum(range(10)), sys.stdin.read().upper())", "stdin": "hi"}),
        )
        .await
        .unwrap();
        assert_eq!(r["stdout"], "45 HI\n", "{r}");
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(r["language"], "python");
        // A traceback names the line.
        let r = code_execute(
            &kit,
            json!({"language": "python", "code": "x = 1\nraise SystemExit(x / 0)"}),
        )
        .await
        .unwrap();
        assert_eq!(r["success"], false, "{r}");
        assert!(r["stderr"].as_str().unwrap().contains("line 2"), "{r}");
    }
    let r = code_execute(
        &kit,
        json!({"language": "bash", "code": "read -r a; arr=(x y z); echo \"${#arr[@]} $a\"; echo err >&2; exit 3", "stdin": "input\n"}),
    )
    .await
    .unwrap();
    assert_eq!(r["stdout"], "3 input\n", "{r}");
    assert_eq!(r["stderr"], "err\n", "{r}");
    assert_eq!(r["exitCode"], 3, "{r}");
    assert_eq!(r["success"], false, "{r}");
    // It runs in the workspace root: what it writes there stays.
    let r = code_execute(
        &kit,
        json!({"language": "sh", "code": "echo made > made.txt; pwd"}),
    )
    .await
    .unwrap();
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(kit.read("made.txt").unwrap(), "made\n");
    if Path::new("/usr/bin/node").exists() {
        let r = code_execute(
            &kit,
            json!({"language": "node", "code": "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>console.log(s.length))", "stdin": "four"}),
        )
        .await
        .unwrap();
        assert_eq!(r["stdout"], "4\n", "{r}");
    }
    // The deny-list answers shell code first, as it answers exec.
    let e = code_execute(&kit, json!({"language": "bash", "code": "rm -rf /"}))
        .await
        .unwrap_err();
    assert!(e.is_access_denied(), "{e:?}");
}

async fn code_execute_output_is_capped(mode: SandboxMode) {
    let Some(kit) = kit_with(mode, |s| s.with_max_output_bytes(4096)) else {
        return;
    };
    let r = code_execute(
        &kit,
        json!({"language": "sh", "code": "yes klaw | head -c 20000000; echo done >&2"}),
    )
    .await
    .unwrap();
    assert_eq!(r["truncated"], true, "{r}");
    let out = r["stdout"].as_str().unwrap();
    assert!(out.len() <= 4096, "{}", out.len());
    assert!(out.ends_with("klaw\n"), "the tail is kept");
    assert_eq!(r["stderr"], "done\n");
}

/// A busy loop that started a sleeper is ended at the time limit, the sleeper too.
async fn code_execute_timeout_kills_the_tree(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let Some(_) = python() else { return };
    let tag = marker();
    let code = format!(
        "import subprocess\nsubprocess.Popen(['sleep', '1000.{tag}'], start_new_session=True)\nwhile True:\n    pass\n"
    );
    let call = code_execute(
        &kit,
        json!({"language": "python", "code": code, "timeout": 2}),
    );
    let watch = eventually(|| !live_with(&tag).is_empty());
    let (result, started) = tokio::join!(call, watch);
    assert!(started, "the sleeper started");
    let e = result.unwrap_err();
    assert!(e.is_timeout(), "{e:?}");
    assert!(
        eventually(|| live_with(&tag).is_empty()).await,
        "the sleeper survived the timeout: {:?}",
        live_with(&tag)
    );
}

/// The code cannot write outside the workspace.
async fn code_execute_stays_in_the_sandbox(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let tag = marker();
    let outside = kit.root().join(format!("outside-{tag}"));
    let etc = format!("/etc/klaw-test-{tag}");
    let code = format!(
        "for p in ['{o}', '{etc}']:\n    try:\n        open(p, 'w').write('x')\n    except OSError as e:\n        print('refused')\nopen('inside.txt', 'w').write('y')\n",
        o = outside.display()
    );
    let (lang, code) = if python().is_some() {
        ("python", code)
    } else {
        (
            "sh",
            format!(
                "echo x > {o}; echo x > {etc}; echo y > inside.txt",
                o = outside.display()
            ),
        )
    };
    let r = code_execute(&kit, json!({"language": lang, "code": code}))
        .await
        .unwrap();
    assert!(!outside.exists(), "wrote beside the workspace: {r}");
    assert!(!Path::new(&etc).exists(), "wrote into /etc: {r}");
    assert!(kit.read("inside.txt").unwrap().starts_with('y'), "{r}");
}

/// An unknown language and a missing interpreter are clear errors naming what is
/// installed.
#[tokio::test]
async fn code_execute_unknown_language_names_the_installed_ones() {
    let Some(kit) = kit(SandboxMode::Off) else {
        return;
    };
    let e = code_execute(&kit, json!({"language": "ruby", "code": "puts 1"}))
        .await
        .unwrap_err();
    assert!(e.is_invalid_arguments(), "{e:?}");
    assert!(
        e.message().contains("unknown language `ruby`"),
        "{}",
        e.message()
    );
    assert!(e.message().contains("installed here: "), "{}", e.message());
    assert!(e.message().contains("sh"), "{}", e.message());
    // With only sh and bash on PATH (here: links in a directory the sandbox does not
    // show, so usable with the sandbox off only), python is missing.
    let dir = tempfile::tempdir().unwrap();
    for p in ["sh", "bash"] {
        std::os::unix::fs::symlink(format!("/usr/bin/{p}"), dir.path().join(p)).unwrap();
    }
    let out = probe_command("code_execute_missing_probe")
        .env("PATH", dir.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("PROBE OK"), "{text}");
}

#[tokio::test]
#[ignore = "entry point of a re-executed child; its parent test runs it"]
async fn code_execute_missing_probe() {
    let kit = kit_for(
        ShellSettings::default().with_sandbox(SandboxMode::Off),
        HELPER,
    );
    let e = code_execute(&kit, json!({"language": "python", "code": "print(1)"}))
        .await
        .unwrap_err();
    assert_eq!(e.kind().code(), "unavailable", "{e:?}");
    assert!(
        e.message().contains("no python interpreter")
            && e.message().ends_with("installed here: bash, sh"),
        "{}",
        e.message()
    );
    // Under a sandbox, an interpreter outside the system directories is not offered.
    if works(SandboxMode::Landlock) {
        let kit = kit_for(
            ShellSettings::default().with_sandbox(SandboxMode::Landlock),
            HELPER,
        );
        let e = code_execute(&kit, json!({"language": "bash", "code": "echo 1"}))
            .await
            .unwrap_err();
        assert_eq!(e.kind().code(), "unavailable", "{e:?}");
        assert!(
            e.message().ends_with("installed here: none"),
            "{}",
            e.message()
        );
    }
    println!("PROBE OK");
}

/// One `#[tokio::test]` per name, each calling the function of that name with `$mode`.
/// The `probes` are entry points of a re-executed copy of this binary: ignored, so that
/// they do not count as passed tests; their parent test runs them with `--ignored`.
/// With `$served`, the commands run through the sandbox server (the thread's flag).
macro_rules! tests_in_mode {
    ($mode:expr, $served:expr; $($name:ident),* $(,)?; probes: $($probe:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                super::SERVED.with(|s| s.set($served));
                super::$name($mode).await
            }
        )*
        $(
            #[tokio::test]
            #[ignore = "entry point of a re-executed child; its parent test runs it"]
            async fn $probe() {
                super::SERVED.with(|s| s.set($served));
                super::$probe($mode).await
            }
        )*
    };
}

macro_rules! per_mode {
    ($($module:ident => $mode:expr, $served:expr);*) => {$(
        mod $module {
            use super::*;
            tests_in_mode!($mode, $served;
                commands_run_under_the_server,
                the_server_is_out_of_the_commands_reach,
                a_daemon_is_gone_before_the_next_command,
                concurrent_commands_keep_their_own_output,
                a_killed_supervisors_tree_is_ended,
                a_long_command_runs_too,
                timeout_kills_a_setsid_grandchild,
                cancelling_a_call_kills_the_tree,
                process_kill_ends_the_whole_tree,
                dropping_the_context_ends_every_job,
                leftovers_end_with_the_command,
                an_output_flood_stays_bounded,
                non_zero_exit_is_a_normal_result,
                a_program_starts_as_execvp_starts_it,
                the_deny_list_answers_first,
                the_environment_does_not_leak,
                inherited_descriptors_do_not_reach_the_command,
                the_tree_dies_with_the_engine,
                a_locked_temp_dir_is_removed,
                run_sandboxed_feeds_stdin,
                code_execute_runs_code,
                code_execute_output_is_capped,
                code_execute_timeout_kills_the_tree,
                the_holes_stay_closed_for_an_unprivileged_engine;
                probes: environment_probe, engine_probe, unprivileged_probe
            );
        }
    )*};
}

macro_rules! per_sandbox {
    ($($module:ident => $mode:expr, $served:expr);*) => {$(
        mod $module {
            use super::*;
            tests_in_mode!($mode, $served;
                writes_outside_the_workspace_do_not_land,
                the_data_dir_and_home_are_not_visible,
                a_skill_s_scripts_run_from_every_folder,
                a_skills_path_in_the_workspace_cannot_be_linked_out,
                host_unix_sockets_are_unreachable,
                the_terminal_is_out_of_reach,
                no_namespaces_through_clone,
                x32_calls_are_refused,
                other_processes_limits_are_out_of_reach,
                proc_sys_is_read_only,
                setuid_bits_and_devices_are_refused,
                clone3_is_absent,
                kernel_interfaces_are_closed,
                commands_never_run_as_root,
                the_command_cannot_end_its_supervisor,
                a_pid_hopper_is_ended,
                host_sysv_ipc_is_out_of_reach,
                mknod_makes_no_setid_files,
                only_bounded_filesystems_take_writes,
                file_notifications_reveal_nothing,
                no_capability_in_any_set,
                code_execute_stays_in_the_sandbox;
                probes: terminal_probe
            );
            #[tokio::test]
            async fn no_network_by_default() {
                super::SERVED.with(|s| s.set($served));
                super::no_network_unless_allowed($mode, false).await
            }
            #[tokio::test]
            async fn network_when_allowed() {
                super::SERVED.with(|s| s.set($served));
                super::no_network_unless_allowed($mode, true).await
            }
        }
    )*};
}

per_mode!(
    bwrap => SandboxMode::Bwrap, false;
    landlock => SandboxMode::Landlock, false;
    off => SandboxMode::Off, false;
    auto => SandboxMode::Auto, false;
    // Through the sandbox server of a serving engine.
    bwrap_served => SandboxMode::Bwrap, true;
    landlock_served => SandboxMode::Landlock, true;
    off_served => SandboxMode::Off, true
);
per_sandbox!(
    bwrap_boundary => SandboxMode::Bwrap, false;
    landlock_boundary => SandboxMode::Landlock, false;
    landlock_boundary_served => SandboxMode::Landlock, true;
    bwrap_boundary_served => SandboxMode::Bwrap, true
);

/// A set-user-ID file made in the workspace would run as its owner for whoever runs it
/// on the host (as root: a set-uid-root binary). Neither Landlock nor bubblewrap covers
/// chmod, so seccomp refuses set-user-ID/set-group-ID bits in both sandboxes; `chmod +x`
/// works. Device nodes are refused too, while FIFOs work.
async fn setuid_bits_and_devices_are_refused(mode: SandboxMode) {
    let Some(kit) = kit(mode) else {
        return;
    };
    let line = "touch f; chmod +x f && echo plus-x; chmod u+s f && echo setuid; \
                chmod 2755 f && echo setgid; stat -c %a f; \
                mkfifo p && echo fifo; mknod c c 1 3 2>/dev/null && echo DEVICE; \
                mknod b b 7 0 2>/dev/null && echo DEVICE; true";
    let r = exec(&kit, json!({"command": line})).await.unwrap();
    assert_eq!(r["stdout"], "plus-x\n755\nfifo\n", "{r}");
    // Nor when the file is created with those bits (open with O_CREAT, creat, O_TMPFILE).
    let Some(py) = python() else { return };
    let script = "import os\n\
        for name, flags in [('u', os.O_CREAT | os.O_WRONLY), ('t', os.O_TMPFILE | os.O_WRONLY)]:\n\
        \x20   for mode in (0o4755, 0o2755):\n\
        \x20       try:\n\
        \x20           fd = os.open(name if name != 't' else '.', flags, mode); os.close(fd)\n\
        \x20       except OSError as e:\n\
        \x20           print(name, oct(mode), 'refused', e.errno)\n\
        fd = os.open('plain', os.O_CREAT | os.O_WRONLY, 0o755); os.close(fd)\n\
        print(oct(os.stat('plain').st_mode & 0o7777), os.path.exists('u'))\n";
    let r = exec(&kit, json!({"command": [py, "-c", script]}))
        .await
        .unwrap();
    assert_eq!(
        r["stdout"],
        "u 0o4755 refused 1\nu 0o2755 refused 1\nt 0o4755 refused 1\nt 0o2755 refused 1\n0o755 False\n",
        "{r}"
    );
}

/// The helper is not dumpable: the command cannot open its lifeline pipe through
/// `/proc/$PPID/fd` (holding it kept the whole tree alive after the engine was killed),
/// nor read its memory.
#[tokio::test]
async fn landlock_helper_is_out_of_the_commands_reach() {
    let Some(kit) = kit(SandboxMode::Landlock) else {
        return;
    };
    // The supervising helpers, found by command line in the host's /proc (as root the
    // command is PID 1 of its own PID namespace, so `$PPID` is 0).
    let line = "for p in /proc/[0-9]*; do \
                  [ \"$(tr '\\0' '\\n' < $p/cmdline 2>/dev/null | sed -n 2p)\" = __klaw-sandbox ] \
                  || continue; echo SEEN; \
                  (exec 9<$p/fd/0) 2>/dev/null && echo HELD; \
                  head -c 1 $p/mem >/dev/null 2>&1 && echo READ; \
                done; true";
    let r = exec(&kit, json!({"command": ["bash", "-c", line]}))
        .await
        .unwrap();
    // A helper is there (the check is meaningful), its descriptors are not reachable.
    let out = r["stdout"].as_str().unwrap();
    assert!(out.contains("SEEN\n"), "{r}");
    assert!(!out.contains("HELD") && !out.contains("READ"), "{r}");
}

/// clone3(2) hides its flags from seccomp, so it looks absent (ENOSYS) in both sandboxes.
async fn clone3_is_absent(mode: SandboxMode) {
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else {
        return;
    };
    let script = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
        args = (ctypes.c_uint64 * 11)(0x10000000, 0, 0, 0, 17)\n\
        print(libc.syscall(435, args, 88), ctypes.get_errno())\n";
    let r = exec(&kit, json!({"command": [py, "-c", script]}))
        .await
        .unwrap();
    assert_eq!(r["stdout"], "-1 38\n", "{r}");
}

/// The kernel interfaces that reach around a sandbox fail with EPERM in both: the
/// keyrings (the session keyring of whoever started the engine, with its keys), io_uring,
/// BPF, perf events, userfaultfd, and ptrace or the memory of the process above the
/// command (bubblewrap's PID 1 could be made to report another exit code; now the
/// command is PID 1 itself, and the helper above a Landlock command is not dumpable).
async fn kernel_interfaces_are_closed(mode: SandboxMode) {
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else {
        return;
    };
    // Syscall numbers per architecture (x86_64, aarch64).
    let script = r#"import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {'x86_64': dict(keyctl=250, add_key=248, io_uring_setup=425, bpf=321, perf_event_open=298, userfaultfd=323, ptrace=101),
      'aarch64': dict(keyctl=219, add_key=217, io_uring_setup=425, bpf=280, perf_event_open=241, userfaultfd=282, ptrace=117)}[platform.machine()]
buf = ctypes.create_string_buffer(512)
calls = [('keyctl', (0, -3, 0)),  # KEYCTL_GET_KEYRING_ID of the session keyring
         ('add_key', (b'user', b'klaw', b'x', 1, -3)),
         ('io_uring_setup', (4, buf)),
         ('bpf', (0, buf, 72)),  # BPF_MAP_CREATE
         ('perf_event_open', (buf, 0, -1, -1, 0)),
         ('userfaultfd', (0,)),
         ('ptrace', (16, os.getppid(), 0, 0))]  # PTRACE_ATTACH to the parent
for name, args in calls:
    r = libc.syscall(nr[name], *args)
    print(name, 'refused' if r == -1 and ctypes.get_errno() == 1 else 'ALLOWED %d errno %d' % (r, ctypes.get_errno()))
for pid in {os.getppid(), 1} - {0, os.getpid()}:
    try:
        open('/proc/%d/mem' % pid, 'r+b').close()
        print('mem', pid, 'OPENED')
    except OSError:
        pass
"#;
    let r = exec(&kit, json!({"command": [py, "-c", script]}))
        .await
        .unwrap();
    let out = r["stdout"].as_str().unwrap();
    assert_eq!(
        out.lines().filter(|l| l.ends_with(" refused")).count(),
        7,
        "{r}"
    );
    assert!(!out.contains("ALLOWED") && !out.contains("OPENED"), "{r}");
}

/// bubblewrap's private `/tmp` lives in memory, so it is bounded (512 MiB): filling it
/// ends in "no space", not in the host running out of memory.
#[tokio::test]
async fn bwrap_tmp_is_bounded() {
    let Some(kit) = kit(SandboxMode::Bwrap) else {
        return;
    };
    let r = exec(&kit, json!({"command": "stat -f -c '%b %S' /tmp"}))
        .await
        .unwrap();
    let out = r["stdout"].as_str().unwrap();
    let (blocks, size) = out.trim().split_once(' ').unwrap();
    let bytes: u64 = blocks.parse::<u64>().unwrap() * size.parse::<u64>().unwrap();
    assert!(bytes > 0 && bytes <= 512 << 20, "{r}");
}

/// Kits under bubblewrap, one-shot then served (the kept sandbox), each with whether it
/// is served; none where bubblewrap does not work here. Leaves the thread's commands
/// served.
fn bwrap_one_shot_and_kept() -> Vec<(bool, Kit)> {
    let mut kits = Vec::new();
    for serve in [false, true] {
        SERVED.with(|s| s.set(serve));
        let Some(kit) = kit(SandboxMode::Bwrap) else {
            break;
        };
        kits.push((serve, kit));
    }
    kits
}

/// Without `network`, bubblewrap's command still has its own loopback (test suites start
/// local servers): the seccomp filter it gets allows IP sockets, its network namespace
/// keeps them off the host. One-shot (bubblewrap brings it up) and kept (the command's
/// process makes the namespace and brings it up itself).
#[tokio::test]
async fn bwrap_has_its_own_loopback() {
    let Some(py) = python() else { return };
    let script = "import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
        c = socket.create_connection(s.getsockname()); a, _ = s.accept()\n\
        c.sendall(b'ping'); print(a.recv(4).decode())\n\
        socket.socket(socket.AF_INET6).bind(('::1', 0)); print('::1')\n";
    python_prints_in_bwrap_kits(py, script, "ping\n::1\n").await;
}

/// Runs the Python `script` through `py` in bubblewrap's one-shot kit, then in the kept
/// sandbox of a serving engine, and asserts each printed `expected`. Leaves the thread's
/// commands served.
async fn python_prints_in_bwrap_kits(py: &str, script: &str, expected: &str) {
    for (serve, kit) in bwrap_one_shot_and_kept() {
        let r = exec(&kit, json!({"command": [py, "-c", script]}))
            .await
            .unwrap();
        assert_eq!(r["stdout"], expected, "served {serve}: {r}");
    }
}

/// Two bubblewrap commands running at once, one-shot or through the kept sandbox of a
/// serving engine, do not meet: neither sees the other's processes (each is PID 1 of a
/// namespace of its own, with its own `/proc`), its `/tmp`, its `/dev/shm` or its System
/// V IPC; neither can open the other's terminal (a pseudo-terminal it opened: reading
/// its slave takes the input meant for the program on it) nor reach a listener it opened
/// on loopback (TCP or an abstract UNIX socket: a command could take the connections
/// meant for the other's test server, or hold its port); and none of the sandbox
/// server's processes has a pid a command could name.
#[tokio::test]
async fn bwrap_commands_do_not_meet() {
    bwrap_commands_do_not_meet_at_all().await;
}

/// The body of [`bwrap_commands_do_not_meet`] (also run by an unprivileged engine);
/// leaves the thread's commands served.
async fn bwrap_commands_do_not_meet_at_all() {
    for (serve, kit) in bwrap_one_shot_and_kept() {
        let tag = marker();
        let key = ipc_key(7);
        // With Python, the first command also holds a terminal with input waiting on it,
        // a TCP listener and an abstract UNIX listener, and says where (in the shared
        // workspace) before it sleeps.
        let first = match python() {
            Some(py) => format!(
                "echo x > /tmp/mark.{tag}; echo x > /dev/shm/mark.{tag}; {py} -c '
import ctypes, os, pty, socket, subprocess
print(ctypes.CDLL(None).shmget({key}, 4096, 0o1600))
m, s = pty.openpty(); os.write(m, b\"secret-input\\n\")
t = socket.socket(); t.bind((\"127.0.0.1\", 0)); t.listen()
u = socket.socket(socket.AF_UNIX); u.bind(\"\\0klaw-meet-{tag}\"); u.listen()
open(\"meet.{tag}\", \"w\").write(\"%s %d\\n\" % (os.ttyname(s), t.getsockname()[1]))
subprocess.call([\"sleep\", \"1000.{tag}\"])
'"
            ),
            None => {
                format!("echo x > /tmp/mark.{tag}; echo x > /dev/shm/mark.{tag}; sleep 1000.{tag}")
            }
        };
        let r = process(
            &kit,
            json!({"action": "start", "command": ["sh", "-c", first]}),
        )
        .await
        .unwrap();
        let id = r["process"]["processId"].as_str().unwrap().to_owned();
        assert!(eventually(|| !live_with(&format!("sleep 1000.{tag}")).is_empty()).await);
        let meet = python().map_or(String::new(), |py| {
            format!(
                "read tty port < meet.{tag}; echo \"tty $tty\"; \
                 timeout 2 head -n 1 $tty 2>/dev/null | grep -q secret && echo SEEN-TERMINAL; \
                 {py} -c '
import socket, sys
for family, address, word in [(socket.AF_INET, (\"127.0.0.1\", int(sys.argv[1])), \"SEEN-LOOPBACK\"),
                              (socket.AF_UNIX, \"\\0klaw-meet-{tag}\", \"SEEN-ABSTRACT\")]:
    try:
        socket.socket(family).connect(address); print(word)
    except OSError:
        pass
' $port; "
            )
        });
        let probe = format!(
            "ls /tmp/mark.{tag} /dev/shm/mark.{tag} 2>/dev/null && echo SEEN-FILE; \
             for p in /proc/[0-9]*; do [ \"$(cat $p/comm)\" = sleep ] && echo SEEN-PROCESS; done; \
             awk '$1 == {key}' /proc/sysvipc/shm | grep -q . && echo SEEN-IPC; {meet}\
             ls /proc | grep -c '^[0-9]'; echo done"
        );
        let r = exec(&kit, json!({"command": ["sh", "-c", probe]}))
            .await
            .unwrap();
        let out = r["stdout"].as_str().unwrap();
        assert!(out.ends_with("done\n"), "served {serve}: {r}");
        for word in [
            "SEEN-FILE",
            "SEEN-PROCESS",
            "SEEN-IPC",
            "SEEN-TERMINAL",
            "SEEN-LOOPBACK",
            "SEEN-ABSTRACT",
        ] {
            assert!(!out.contains(word), "served {serve}: {word}: {r}");
        }
        // The first command's terminal and listeners were there to be found.
        assert!(
            python().is_none() || out.contains("tty /dev/pts/"),
            "served {serve}: {r}"
        );
        // Its own processes only: sh, ls and grep.
        let pids: u32 = out.lines().rev().nth(1).unwrap().trim().parse().unwrap();
        assert!(pids <= 4, "served {serve}: {pids} processes seen: {r}");
        process(&kit, json!({"action": "kill", "processId": id}))
            .await
            .unwrap();
    }
}

/// A bubblewrap command cannot take away the mounts it was given to reach what they
/// cover: in the kept sandbox of a serving engine its `/proc`, `/tmp`, `/dev/shm` and
/// `/dev/pts` lie over the sandbox's own, which every command of the server shares (the
/// holder's `/proc`, the one devpts), so unmounting one would open a way to the other
/// commands. `umount2` (plain and detached) fails on each, and each stays the same
/// filesystem; one-shot too.
#[tokio::test]
async fn bwrap_covered_mounts_stay_covered() {
    bwrap_covered_mounts_stay_covered_at_all().await;
}

/// The body of [`bwrap_covered_mounts_stay_covered`] (also run by an unprivileged
/// engine); leaves the thread's commands served.
async fn bwrap_covered_mounts_stay_covered_at_all() {
    let Some(py) = python() else { return };
    let script = "import ctypes, os\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        dirs = ['/proc', '/tmp', '/dev/shm', '/dev/pts']\n\
        before = [os.stat(d).st_dev for d in dirs]\n\
        for d in dirs:\n\
        \x20   for flags in (0, 2):\n\
        \x20       if libc.umount2(d.encode(), flags) == 0: print('UNMOUNTED', d)\n\
        print('same' if [os.stat(d).st_dev for d in dirs] == before else 'CHANGED')\n";
    python_prints_in_bwrap_kits(py, script, "same\n").await;
}

/// When the kept sandbox of a serving engine dies (its bubblewrap killed), its server
/// ends with it, and the next command runs under a new server and sandbox.
#[tokio::test]
async fn a_dead_kept_sandbox_is_replaced() {
    SERVED.with(|s| s.set(true));
    let Some(kit) = kit(SandboxMode::Bwrap) else {
        return;
    };
    let server = server_of(&kit).await.expect("a served command");
    let bwrap = live_with("--die-with-parent")
        .into_iter()
        .find(|p| parent_of(*p) == Some(server))
        .expect("the server's bubblewrap");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(bwrap).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    assert!(
        eventually(|| !alive(server)).await,
        "the server outlived its sandbox"
    );
    let r = exec(&kit, json!({"command": "echo again"})).await.unwrap();
    assert_eq!(r["stdout"], "again\n", "{r}");
    let again = server_of(&kit).await;
    assert!(
        again.is_some_and(|s| s != server),
        "{again:?} after {server}"
    );
}

/// A kept bubblewrap command dies with its supervisor even where nothing sweeps after
/// it (here: the server is stopped): the command (PID 1 of its namespace) is killed by
/// the kernel when the supervisor dies, and everything in its namespace with it. (Its
/// parent-death signal is set after its last change of credentials, which could clear
/// it.)
#[tokio::test]
async fn a_kept_command_dies_with_its_supervisor() {
    a_kept_command_dies_with_its_supervisor_at_all().await;
}

/// The body of [`a_kept_command_dies_with_its_supervisor`] (also run by an unprivileged
/// engine).
async fn a_kept_command_dies_with_its_supervisor_at_all() {
    use rustix::process::{Pid, Signal, kill_process};
    SERVED.with(|s| s.set(true));
    let Some(kit) = kit(SandboxMode::Bwrap) else {
        return;
    };
    let (id, tag, serving) = sleeping_job(&kit).await;
    // The supervisor, the server.
    let [supervisor, server] = serving[..] else {
        panic!("not a served kept command: {serving:?}");
    };
    let pid = |p| Pid::from_raw(p).unwrap();
    kill_process(pid(server), Signal::STOP).unwrap();
    kill_process(pid(supervisor), Signal::KILL).unwrap();
    let gone = eventually(|| live_with(&format!("1000.{tag}")).is_empty()).await;
    let left = live_with(&format!("1000.{tag}"));
    kill_process(pid(server), Signal::CONT).unwrap();
    assert!(gone, "the command outlived its supervisor: {left:?}");
    let _ = process(&kit, json!({"action": "kill", "processId": id})).await;
}

/// The helper enters the working directory by descriptor, beneath the workspace and
/// through no link: a link swapped in for the directory after the engine checked it
/// (here: already there, as the race would leave it) is refused, not followed outside.
#[test]
fn the_helper_refuses_a_working_dir_swapped_for_a_link() {
    use std::io::Read;
    if !works(SandboxMode::Landlock) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let ws = base.join("ws");
    std::fs::create_dir_all(ws.join("real")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::os::unix::fs::symlink(base.join("outside"), ws.join("swapped")).unwrap();
    let run = |cwd: &Path| {
        let policy = json!({"landlock": true, "network": false, "write": [ws], "cwd": cwd});
        let mut child = std::process::Command::new(HELPER)
            .args(["__klaw-sandbox", &policy.to_string(), "pwd"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The lifeline stays open until the helper is done.
        let _lifeline = child.stdin.take();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (child.wait().unwrap().success(), out, err)
    };
    let (ok, out, err) = run(&ws.join("real"));
    assert!(ok, "{out}{err}");
    assert_eq!(out.trim(), ws.join("real").to_str().unwrap());
    let (ok, out, err) = run(&ws.join("swapped"));
    assert!(!ok, "entered the link's target: {out}{err}");
    assert!(err.contains("no longer beneath the workspace"), "{err}");
}

#[test]
fn a_real_sandbox_is_exercised() {
    let bwrap = klaw_sandbox::describe(SandboxMode::Bwrap, Some(helper()));
    let landlock = klaw_sandbox::describe(SandboxMode::Landlock, Some(helper()));
    eprintln!("bwrap: {bwrap:?}\nlandlock: {landlock:?}");
    if std::env::var_os("KLAW_ALLOW_NO_SANDBOX").is_none() {
        assert!(
            bwrap.is_ok() || landlock.is_ok(),
            "neither bwrap nor landlock works here, so no sandbox test ran \
             (run scripts/setup.sh, or set KLAW_ALLOW_NO_SANDBOX=1 on a machine that cannot have one)"
        );
    }
}

#[tokio::test]
async fn a_broken_helper_fails_closed() {
    let kit = kit_for(
        ShellSettings::default().with_sandbox(SandboxMode::Landlock),
        "/bin/true",
    );
    let e = exec(&kit, json!({"command": "echo hi"})).await.unwrap_err();
    assert_eq!(e.kind(), &klaw_tools::ErrorKind::Unavailable, "{e:?}");
    assert!(e.message().contains("landlock"), "{}", e.message());
    assert!(klaw_sandbox::describe(SandboxMode::Landlock, Some(Path::new("/bin/true"))).is_err());
}

#[tokio::test]
async fn working_dirs_outside_the_workspace_are_refused() {
    let Some(kit) = kit(SandboxMode::Auto) else {
        return;
    };
    for bad in ["..", "/etc", "../data"] {
        let e = exec(&kit, json!({"command": "pwd", "workingDir": bad}))
            .await
            .unwrap_err();
        assert!(e.is_access_denied(), "{bad}: {e:?}");
    }
    let e = exec(&kit, json!({"command": "pwd", "workingDir": "nope"}))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    let e = exec(&kit, json!({"command": []})).await.unwrap_err();
    assert!(e.is_invalid_arguments(), "{e:?}");
    let e = exec(&kit, json!({"command": 42})).await.unwrap_err();
    assert!(e.is_invalid_arguments(), "{e:?}");
}

// ---- process ----

#[tokio::test]
async fn process_start_status_log_kill_list() {
    let Some(kit) = kit(SandboxMode::Auto) else {
        return;
    };
    let tag = marker();
    let started = process(
        &kit,
        json!({"action": "start", "command": format!("echo started; echo warn >&2; sleep 1000.{tag}")}),
    )
    .await
    .unwrap();
    let p = &started["process"];
    assert_eq!(p["running"], true, "{started}");
    let id = p["processId"].as_str().unwrap().to_owned();
    assert!(id.starts_with("proc-"), "{id}");

    let mut log = Value::Null;
    let mut logged = false;
    for _ in 0..300 {
        log = process(&kit, json!({"action": "log", "processId": id, "tail": 100}))
            .await
            .unwrap();
        if log["stdout"] == "started\n" && log["stderr"] == "warn\n" {
            logged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(logged, "{log}");
    assert_eq!(log["tail"], 100);

    // `pid` is an alias of `processId`.
    let status = process(&kit, json!({"action": "status", "pid": id}))
        .await
        .unwrap();
    assert_eq!(status["process"]["running"], true, "{status}");
    assert_eq!(status["process"]["processId"], id.as_str());

    let list = process(&kit, json!({"action": "list"})).await.unwrap();
    let ids: Vec<&str> = list["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["processId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id.as_str()]);

    let killed = process(&kit, json!({"action": "kill", "processId": id}))
        .await
        .unwrap();
    assert_eq!(killed["killed"], true, "{killed}");
    assert_eq!(killed["process"]["running"], false, "{killed}");
    assert!(killed["process"]["endedAt"].is_string(), "{killed}");
    assert!(eventually(|| live_with(&tag).is_empty()).await);

    let again = process(&kit, json!({"action": "kill", "processId": id}))
        .await
        .unwrap();
    assert_eq!(again["killed"], false, "{again}");

    let e = process(&kit, json!({"action": "status", "processId": "proc-999"}))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    let e = process(&kit, json!({"action": "status"}))
        .await
        .unwrap_err();
    assert!(e.is_invalid_arguments(), "{e:?}");
    let e = process(&kit, json!({"action": "start"})).await.unwrap_err();
    assert!(e.is_invalid_arguments(), "{e:?}");
}

#[tokio::test]
async fn a_finished_process_reports_its_exit_code() {
    let Some(kit) = kit(SandboxMode::Auto) else {
        return;
    };
    let r = process(
        &kit,
        json!({"action": "start", "command": ["sh", "-c", "echo bye; exit 4"]}),
    )
    .await
    .unwrap();
    let id = r["process"]["processId"].as_str().unwrap().to_owned();
    let mut status = Value::Null;
    for _ in 0..300 {
        status = process(&kit, json!({"action": "status", "processId": id}))
            .await
            .unwrap();
        if status["process"]["running"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status["process"]["running"], false, "{status}");
    assert_eq!(status["process"]["exitCode"], 4, "{status}");
    let log = process(&kit, json!({"action": "log", "processId": id}))
        .await
        .unwrap();
    assert_eq!(log["stdout"], "bye\n");
    assert_eq!(log["tail"], 4096);
}

async fn process_kill_ends_the_whole_tree(mode: SandboxMode) {
    let Some(kit) = kit(mode) else {
        return;
    };
    let tag = marker();
    let r = process(
        &kit,
        json!({"action": "start", "command": setsid_grandchild(&tag)}),
    )
    .await
    .unwrap();
    let id = r["process"]["processId"].as_str().unwrap().to_owned();
    assert!(eventually(|| grandchild_of(&tag).is_some()).await);
    let grandchild = grandchild_of(&tag).unwrap();
    process(&kit, json!({"action": "kill", "processId": id}))
        .await
        .unwrap();
    assert!(
        eventually(|| !alive(grandchild)).await,
        "grandchild {grandchild} survived kill"
    );
    assert!(
        eventually(|| live_with(&tag).is_empty()).await,
        "{:?}",
        live_with(&tag)
    );
}

#[tokio::test]
async fn the_process_cap_is_enforced() {
    let Some(kit) = kit_with(SandboxMode::Auto, |s| s.with_max_processes(2)) else {
        return;
    };
    let tag = marker();
    let cmd = format!("sleep 1000.{tag}");
    let a = process(&kit, json!({"action": "start", "command": cmd}))
        .await
        .unwrap();
    process(&kit, json!({"action": "start", "command": cmd}))
        .await
        .unwrap();
    let e = process(&kit, json!({"action": "start", "command": cmd}))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), &klaw_tools::ErrorKind::Unavailable, "{e:?}");
    assert!(e.message().contains("2 running"), "{}", e.message());
    let id = a["process"]["processId"].as_str().unwrap();
    process(&kit, json!({"action": "kill", "processId": id}))
        .await
        .unwrap();
    process(&kit, json!({"action": "start", "command": cmd}))
        .await
        .unwrap();
    drop(kit);
    assert!(eventually(|| live_with(&tag).is_empty()).await);
}

async fn dropping_the_context_ends_every_job(mode: SandboxMode) {
    let Some(kit) = kit(mode) else {
        return;
    };
    let tag = marker();
    process(
        &kit,
        json!({"action": "start", "command": setsid_grandchild(&tag)}),
    )
    .await
    .unwrap();
    process(
        &kit,
        json!({"action": "start", "command": format!("sleep 1000.2{tag}")}),
    )
    .await
    .unwrap();
    assert!(
        eventually(|| live_with(&tag).len() >= 3).await,
        "{:?}",
        live_with(&tag)
    );
    drop(kit);
    assert!(
        eventually(|| live_with(&tag).is_empty()).await,
        "jobs outlived their context: {:?}",
        live_with(&tag)
    );
}

/// A directory with a `bwrap` that always fails, as on a machine without user namespaces.
fn broken_bwrap_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `auto` with neither bwrap nor a working helper refuses to run anything. The probe
/// result is cached per process and PATH cannot be changed in-process without `unsafe`,
/// so the check runs in a child copy of this test binary whose PATH starts with a broken
/// `bwrap`.
#[test]
fn auto_fails_closed_when_no_sandbox_works() {
    let fake = broken_bwrap_dir();
    let path = format!(
        "{}:{}",
        fake.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = probe_command("auto_fails_closed_probe")
        .env("PATH", path)
        .env("KLAW_TEST_BROKEN_BWRAP", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed") && stderr.contains("fail-closed probe ran"),
        "{stdout}\n{stderr}"
    );
}

#[tokio::test]
#[ignore = "entry point of a re-executed child; its parent test runs it"]
async fn auto_fails_closed_probe() {
    if std::env::var_os("KLAW_TEST_BROKEN_BWRAP").is_none() {
        return; // only meaningful when started by `auto_fails_closed_when_no_sandbox_works`
    }
    let why = klaw_sandbox::describe(SandboxMode::Bwrap, Some(helper()))
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("No permissions to create new namespace"),
        "{why}"
    );
    // bwrap broken, helper working: auto falls back to Landlock and says so.
    if klaw_sandbox::describe(SandboxMode::Landlock, Some(helper())).is_ok() {
        let fallback = klaw_sandbox::describe(SandboxMode::Auto, Some(helper())).unwrap();
        assert!(
            fallback
                .starts_with("landlock + seccomp (bwrap does not work here: bwrap: No permissions"),
            "{fallback}"
        );
        let kit = kit(SandboxMode::Auto).unwrap();
        let r = exec(&kit, json!({"command": "echo hi"})).await.unwrap();
        assert_eq!(r["sandbox"], "landlock", "{r}");
    } else {
        eprintln!("skipping the fallback check: Landlock does not work here");
    }
    // bwrap broken and the helper broken: nothing runs.
    let kit = kit_for(ShellSettings::default(), "/bin/true");
    let e = exec(&kit, json!({"command": "echo hi"})).await.unwrap_err();
    assert_eq!(e.kind(), &klaw_tools::ErrorKind::Unavailable, "{e:?}");
    assert!(
        e.message()
            .starts_with("no OS sandbox works here, so commands are refused"),
        "{}",
        e.message()
    );
    eprintln!("fail-closed probe ran");
}

/// A cancelled call (the user stopped the turn) ends the command's whole tree, as a
/// timeout does.
async fn cancelling_a_call_kills_the_tree(mode: SandboxMode) {
    let Some(kit) = kit(mode) else {
        return;
    };
    let tag = marker();
    let token = tokio_util::sync::CancellationToken::new();
    let ctx = kit.context().clone().with_cancellation(token.clone());
    let call = kit.registry().execute(
        &ctx,
        "exec",
        json!({"command": setsid_grandchild(&tag), "timeout": 300}),
    );
    let cancel = async {
        let mut pid = None;
        eventually(|| {
            pid = grandchild_of(&tag);
            pid.is_some()
        })
        .await;
        token.cancel();
        pid
    };
    let (result, grandchild) = tokio::join!(call, cancel);
    let grandchild = grandchild.expect("the grandchild started");
    let e = result.unwrap_err();
    assert_eq!(e.kind(), &klaw_tools::ErrorKind::Cancelled, "{e:?}");
    assert!(
        eventually(|| !alive(grandchild)).await,
        "grandchild {grandchild} survived the cancellation"
    );
    assert!(
        eventually(|| live_with(&tag).is_empty()).await,
        "{:?}",
        live_with(&tag)
    );
}

/// If the engine dies (here: the pipe it holds to the helper's stdin closes without any
/// kill), the helper ends the whole tree on its own.
#[test]
fn the_helper_ends_the_tree_when_the_engine_goes_away() {
    let ws = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws.path()).unwrap();
    let tag = marker();
    let policy = json!({"landlock": false, "network": false, "write": [ws], "cwd": ws});
    let mut helper = std::process::Command::new(HELPER)
        .arg(klaw_sandbox::HELPER_ARG)
        .arg(policy.to_string())
        .args(["sh", "-c", &setsid_grandchild(&tag)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = (0..300).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        grandchild_of(&tag).is_some()
    });
    assert!(started, "the grandchild did not start");
    let grandchild = grandchild_of(&tag).unwrap();
    drop(helper.stdin.take()); // the engine is gone
    let status = helper.wait().unwrap();
    assert_eq!(status.code(), Some(137));
    let gone = (0..300).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        !alive(grandchild) && live_with(&tag).is_empty()
    });
    assert!(gone, "left behind: {:?}", live_with(&tag));
}

// ---- the second red team (issue 25): each check as the attacker tried it ----

/// A key for System V IPC objects that no other test (or earlier run) uses.
fn ipc_key(n: u32) -> u32 {
    let m: u64 = marker()
        .parse::<u128>()
        .map_or(1, |m| (m % 0x00ff_ffff) as u64);
    0x4b00_0000 | ((m as u32 + n * 7919) & 0x00ff_ffff)
}

/// Whether the host's IPC namespace has an object of `kind` (`shm`, `msg`, `sem`) with
/// `key` (the first column of `/proc/sysvipc/<kind>`).
fn host_ipc_has(kind: &str, key: u32) -> bool {
    let table = std::fs::read_to_string(format!("/proc/sysvipc/{kind}")).unwrap_or_default();
    table
        .lines()
        .skip(1)
        .any(|l| l.split_whitespace().next() == Some(&key.to_string()))
}

/// Runs `script` with the system Python outside any sandbox (as the engine's user).
fn host_python(py: &str, script: &str, args: &[String]) -> String {
    let out = std::process::Command::new(py)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Removes the System V IPC objects with these keys from the host, whatever a failed
/// run left.
fn remove_host_ipc(keys: &[(&str, u32)]) {
    for (kind, key) in keys {
        let flag = match *kind {
            "shm" => "-M",
            "msg" => "-Q",
            _ => "-S",
        };
        let _ = std::process::Command::new("ipcrm")
            .args([flag, &key.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// (1) Landlock does not cover System V IPC, and a Landlock command lived in the
/// host's IPC namespace: it read a private (0600) shared-memory segment of the engine's
/// user and left a 64 MiB segment pinned on the host. Now it sees no host IPC object and
/// leaves none: bubblewrap gives it an IPC namespace of its own, and under Landlock the
/// calls look absent.
async fn host_sysv_ipc_is_out_of_reach(mode: SandboxMode) {
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else { return };
    let (secret, pinned, queue, sems) = (ipc_key(0), ipc_key(1), ipc_key(2), ipc_key(3));
    let keys = [
        ("shm", secret),
        ("shm", pinned),
        ("msg", queue),
        ("sem", sems),
    ];
    remove_host_ipc(&keys);
    // The engine's user holds a private segment with a secret in it.
    let made = host_python(
        py,
        "import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         libc.shmat.restype = ctypes.c_void_p\n\
         i = libc.shmget(int(sys.argv[1]), 4096, 0o1000 | 0o2000 | 0o600)\n\
         assert i >= 0, ctypes.get_errno()\n\
         p = libc.shmat(i, None, 0)\n\
         ctypes.memmove(p, b'klaw-ipc-secret', 15)\nlibc.shmdt(ctypes.c_void_p(p))\nprint('made')\n",
        &[secret.to_string()],
    );
    assert_eq!(made, "made\n");
    let attack = "import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n\
        libc.shmat.restype = ctypes.c_void_p\n\
        secret, pinned, queue, sems = (int(a) for a in sys.argv[1:5])\n\
        i = libc.shmget(secret, 0, 0)\n\
        if i >= 0:\n\
        \x20   p = libc.shmat(i, None, 0)\n\
        \x20   print('READ', ctypes.string_at(p, 15) if p and p != 2**64 - 1 else ctypes.get_errno())\n\
        \x20   if p and p != 2**64 - 1: ctypes.memmove(p, b'overwritten', 11)\n\
        else:\n\
        \x20   print('shm', ctypes.get_errno())\n\
        print('pin', libc.shmget(pinned, 64 << 20, 0o1000 | 0o600) >= 0)\n\
        print('msg', libc.msgget(queue, 0o1000 | 0o600) >= 0)\n\
        print('sem', libc.semget(sems, 1, 0o1000 | 0o600) >= 0)\n";
    let args: Vec<String> = [secret, pinned, queue, sems]
        .iter()
        .map(u32::to_string)
        .collect();
    let mut command = vec![py.to_owned(), "-c".into(), attack.into()];
    command.extend(args);
    let r = exec(&kit, json!({"command": command})).await;
    // What the host has after the call, before anything is cleaned up.
    let left: Vec<_> = keys[1..]
        .iter()
        .filter(|(kind, key)| host_ipc_has(kind, *key))
        .collect();
    let intact = host_python(
        py,
        "import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         libc.shmat.restype = ctypes.c_void_p\n\
         p = libc.shmat(libc.shmget(int(sys.argv[1]), 0, 0), None, 0)\n\
         print(ctypes.string_at(p, 15).decode())\n",
        &[secret.to_string()],
    );
    remove_host_ipc(&keys);
    let r = r.unwrap();
    let out = r["stdout"].as_str().unwrap();
    assert!(!out.contains("READ"), "the host's segment was reached: {r}");
    assert!(left.is_empty(), "left on the host: {left:?}; {r}");
    assert_eq!(intact, "klaw-ipc-secret\n", "{r}");
    eprintln!("{mode:?}: {}", out.replace('\n', "; "));
}

/// (2) As root, `mknod` made a root-owned set-uid file in the workspace
/// (`umask 0; os.mknod("s", 0o104755)`), past the refusal of `chmod` and `open` with
/// those bits. Now `mknod` with a set-user-ID or set-group-ID bit is refused too,
/// whatever the file type; plain files and FIFOs are still made.
async fn mknod_makes_no_setid_files(mode: SandboxMode) {
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else { return };
    let script = "import os, stat\nos.umask(0)\n\
        for name, m in [('s', stat.S_IFREG | 0o4755), ('g', stat.S_IFREG | 0o2755),\n\
        \x20               ('p', stat.S_IFIFO | 0o4644), ('e', 0o6755)]:\n\
        \x20   try:\n\
        \x20       os.mknod(name, m)\n\
        \x20       print(name, 'MADE', oct(os.stat(name).st_mode))\n\
        \x20   except OSError as e:\n\
        \x20       print(name, 'refused', e.errno)\n\
        os.mknod('plain', stat.S_IFREG | 0o755); os.mknod('fifo', stat.S_IFIFO | 0o644)\n\
        print(oct(os.stat('plain').st_mode), oct(os.stat('fifo').st_mode))\n";
    let r = exec(&kit, json!({"command": [py, "-c", script]}))
        .await
        .unwrap();
    assert_eq!(
        r["stdout"], "s refused 1\ng refused 1\np refused 1\ne refused 1\n0o100755 0o10644\n",
        "{r}"
    );
    for name in ["s", "g", "p", "e"] {
        assert!(!kit.workspace().join(name).exists(), "{name}: {r}");
    }
}

/// (3) bubblewrap builds the root and `/dev` as memory filesystems as large as the
/// host's memory, and left them writable: 600 MB written to `/x/big` or `/dev/shm/big`
/// stayed in memory as long as the sandbox lived. Now only the workspace, `/tmp` and a
/// bounded `/dev/shm` take writes (under Landlock neither `/` nor `/dev` ever did).
async fn only_bounded_filesystems_take_writes(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let line = "for f in /x /dev/x /usr/x; do (echo x > $f) 2>/dev/null && echo \"WROTE $f\"; done; \
                mkdir /newdir 2>/dev/null && echo 'MADE /newdir'; \
                mkdir /x 2>/dev/null && echo 'MADE /x'; \
                head -c 71303168 /dev/zero > /dev/shm/klaw-big 2>/dev/null && echo 'FILLED /dev/shm'; \
                rm -f /dev/shm/klaw-big; \
                if (: > /dev/shm/klaw-probe) 2>/dev/null; then stat -f -c 'shm %b %S' /dev/shm; \
                rm /dev/shm/klaw-probe; fi; \
                echo t > $TMPDIR/t && echo tmp-ok; echo w > w && echo ws-ok";
    let r = exec(&kit, json!({"command": line})).await.unwrap();
    let out = r["stdout"].as_str().unwrap();
    for bad in ["WROTE", "MADE", "FILLED"] {
        assert!(!out.contains(bad), "{r}");
    }
    assert!(out.ends_with("tmp-ok\nws-ok\n"), "{r}");
    if let Some(shm) = out.lines().find_map(|l| l.strip_prefix("shm ")) {
        let (blocks, size) = shm.split_once(' ').unwrap();
        let bytes = blocks.parse::<u64>().unwrap() * size.parse::<u64>().unwrap();
        assert!(bytes > 0 && bytes <= 64 << 20, "{r}");
    }
    assert!(!Path::new("/dev/shm/klaw-big").exists());
}

/// (4) A command's private temporary directory outlived its call when the command
/// locked a directory in it (`chmod 000`): removal gave up at the first directory it
/// could not enter. Now permissions are given back first, and a job killed while its
/// tree was still writing there leaves nothing either. (As root every permission check
/// passes: the unprivileged engine, `the_holes_stay_closed_for_an_unprivileged_engine`,
/// is the case that failed.)
async fn a_locked_temp_dir_is_removed(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let line = "mkdir -p $TMPDIR/k/s && echo x > $TMPDIR/k/s/f && \
                chmod 000 $TMPDIR/k/s $TMPDIR/k && echo $TMPDIR";
    let r = exec(&kit, json!({"command": line})).await.unwrap();
    let tmp = r["stdout"].as_str().unwrap().trim().to_owned();
    if r["sandbox"] == "bwrap" {
        // Its private /tmp is gone with its mount namespace.
        assert_eq!(tmp, "/tmp", "{r}");
        return;
    }
    assert!(tmp.contains("/klaw-exec-"), "{r}");
    assert!(
        eventually(|| !Path::new(&tmp).exists()).await,
        "{tmp} outlived its command"
    );
    // A job whose tree keeps writing there until it is killed.
    let r = process(
        &kit,
        json!({"action": "start", "command": "echo $TMPDIR; for i in 1 2 3; do \
            (while :; do mkdir -p $TMPDIR/w$i/$RANDOM/d; chmod 000 $TMPDIR/w$i; done) & done; wait"}),
    )
    .await
    .unwrap();
    let id = r["process"]["processId"].as_str().unwrap().to_owned();
    let mut tmp = String::new();
    for _ in 0..300 {
        let log = process(&kit, json!({"action": "log", "processId": id}))
            .await
            .unwrap();
        tmp = log["stdout"].as_str().unwrap_or("").trim().to_owned();
        if !tmp.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(tmp.contains("/klaw-exec-"), "{tmp:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    process(&kit, json!({"action": "kill", "processId": id}))
        .await
        .unwrap();
    assert!(
        eventually(|| !Path::new(&tmp).exists()).await,
        "{tmp} outlived its killed job"
    );
}

// ---- the third red team (issue 42): each check as the attacker tried it ----

/// What a watcher tries: inotify and fanotify on the paths given as arguments, and
/// dnotify on its working directory; it says how each call went (`name result errno`),
/// writes `watching` in the workspace, then prints every event it reads for a while.
const NOTIFY_PROBE: &str = r#"import ctypes, fcntl, os, platform, select, signal, struct, sys, time
signal.signal(signal.SIGIO, lambda *_: print('dnotify-event'))
libc = ctypes.CDLL(None, use_errno=True)
libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
def report(name, r):
    print(name, r, ctypes.get_errno() if r < 0 else 0)
    return r
if platform.machine() == 'x86_64':
    fd = report('inotify_init', libc.inotify_init())
    if fd >= 0: os.close(fd)
ino = report('inotify_init1', libc.inotify_init1(os.O_NONBLOCK))
report('inotify_add_watch', libc.inotify_add_watch(ino, b'.', 0xfff))
fan = report('fanotify_init', libc.fanotify_init(0x200, 0))
report('fanotify_mark', libc.fanotify_mark(fan, 1, 0x20 | 0x100 | 0x08000000, -100, b'.'))
try:
    d = os.open('.', os.O_RDONLY)
    fcntl.fcntl(d, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_CREATE | fcntl.DN_MULTISHOT)
    print('dnotify', 0)
except OSError as e:
    print('dnotify', e.errno)
for path in sys.argv[1:]:
    if ino >= 0:
        print('watch', path, libc.inotify_add_watch(ino, path.encode(), 0xfff) >= 0)
    if fan >= 0:
        print('mark', path, libc.fanotify_mark(fan, 1, 0x20 | 0x100 | 0x08000000, -100, path.encode()) == 0)
sys.stdout.flush()
open('watching', 'w').close()
fds = [f for f in (ino, fan) if f >= 0]
end = time.monotonic() + 3
while fds and time.monotonic() < end:
    for f in select.select(fds, [], [], 0.2)[0]:
        buf = os.read(f, 65536)
        while f == ino and buf:
            wd, mask, cookie, n = struct.unpack_from('iIII', buf)
            print('event', buf[16:16 + n].rstrip(b'\0').decode(errors='replace'), hex(mask))
            buf = buf[16 + n:]
        if f == fan:
            print('fanotify-event', len(buf))
"#;

/// (12) inotify under Landlock: a command watched the data dir, the home and `/tmp`
/// (`inotify_add_watch` needs no Landlock right) and learnt the names and timing of
/// the files other processes made there, which it could not list. Under bubblewrap a
/// watch on a system directory both sandboxes show (`/etc`) reports the host's opens of
/// every file there, `/etc/shadow` included. Now inotify and fanotify look absent
/// (`ENOSYS`, as on a kernel built without them) and `fcntl(F_NOTIFY)` fails (`EINVAL`)
/// in both sandboxes, one-shot and served: the watcher learns nothing while the
/// engine's side makes files there and reads `/etc`. `tail -f` of a growing file still
/// follows it (it falls back to polling).
async fn file_notifications_reveal_nothing(mode: SandboxMode) {
    let Some(py) = python() else { return };
    let Some(kit) = kit(mode) else { return };
    let outside = tempfile::tempdir().unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let paths = [
        kit.data_dir().to_path_buf(),
        outside.path().to_path_buf(),
        home.into(),
        "/tmp".into(),
        "/etc".into(),
    ];
    let mut command = vec![py.to_owned(), "-c".into(), NOTIFY_PROBE.into()];
    command.extend(paths.iter().map(|p| p.display().to_string()));
    let name = format!("klaw-notify-{}", marker());
    let watcher = exec(&kit, json!({"command": command}));
    let host = async {
        // Once the command has set its watches (or ended), other processes make files
        // where it may not look, and read a system file.
        let ready = kit.workspace().join("watching");
        for _ in 0..1500 {
            if ready.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for dir in &paths[..2] {
            std::fs::write(dir.join(&name), "x").unwrap();
        }
        std::fs::read("/etc/passwd").unwrap();
    };
    let (r, ()) = tokio::join!(watcher, host);
    let r = r.unwrap();
    let out = r["stdout"].as_str().unwrap();
    let absent = "inotify_init1 -1 38\ninotify_add_watch -1 38\n\
                  fanotify_init -1 38\nfanotify_mark -1 38\ndnotify 22\n";
    let expected = if cfg!(target_arch = "x86_64") {
        format!("inotify_init -1 38\n{absent}")
    } else {
        absent.to_owned()
    };
    assert!(!out.contains(&name), "a watch saw {name}: {r}");
    assert!(!out.contains("event"), "a watch saw events: {r}");
    assert_eq!(out, expected, "{r}");
    // Programs that watch a file fall back to polling: `tail -f` follows a growing one.
    let line = "echo one > grow.log; (sleep 1; echo two >> grow.log; sleep 1; \
                echo three >> grow.log) & timeout 8 tail -f grow.log; wait; true";
    let r = exec(&kit, json!({"command": ["bash", "-c", line]}))
        .await
        .unwrap();
    assert_eq!(r["stdout"], "one\ntwo\nthree\n", "{r}");
}

/// (A side note) A Landlock engine started as a user other than root left its
/// command's bounding set full: dropping from it takes `CAP_SETPCAP`, which such a user
/// lacks. Now every capability set of the command is empty in both sandboxes, the
/// bounding set included: as root directly; as another user, the command first joins a
/// user namespace of its own user, wherever the machine allows that user one. Where it
/// does not, the bounding set stays and no-new-privileges, set in every case, keeps
/// `exec` from gaining anything from it.
async fn no_capability_in_any_set(mode: SandboxMode) {
    let Some(kit) = kit(mode) else { return };
    let r = exec(
        &kit,
        json!({"command": "grep -E '^(Cap|NoNewPrivs)' /proc/self/status"}),
    )
    .await
    .unwrap();
    let out = r["stdout"].as_str().unwrap();
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {name}: {r}"))
    };
    for set in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
        assert_eq!(field(set), "0000000000000000", "{set} {r}");
    }
    assert_eq!(field("NoNewPrivs:"), "1", "{r}");
    let userns = rustix::process::geteuid().is_root()
        || std::process::Command::new("unshare")
            .args(["--user", "true"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if userns {
        assert_eq!(field("CapBnd:"), "0000000000000000", "{r}");
    } else {
        eprintln!("no user namespace for this user here: the bounding set may stay ({r})");
    }
}

/// The holes above tried with the engine as an unprivileged user (as a user runs it on
/// a desktop): this test binary, started again as `nobody`, runs them in `mode`. When
/// the tests run as root (as CI runs them), the checks above were root's; this is the
/// other half. Says why where the machine does not allow it.
async fn the_holes_stay_closed_for_an_unprivileged_engine(mode: SandboxMode) {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "the tests run unprivileged here: the checks above were the unprivileged engine's"
        );
        return;
    }
    const NOBODY: u32 = 65534;
    let probe = format!("{}::unprivileged_probe", mode_module(mode));
    let out = match probe_command(&probe)
        .uid(NOBODY)
        .gid(NOBODY)
        .env_clear()
        .env("PATH", klaw_sandbox::DEFAULT_PATH)
        .env("KLAW_TEST_UNPRIVILEGED", "1")
        .current_dir("/")
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipping: this test binary cannot run as uid {NOBODY} here: {e}");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed")
            && (stderr.contains("unprivileged probe ran") || stderr.contains("skipping")),
        "the probe did not run: {stdout}\n{stderr}"
    );
    eprintln!("{stderr}");
}

async fn unprivileged_probe(mode: SandboxMode) {
    if std::env::var_os("KLAW_TEST_UNPRIVILEGED").is_none() {
        return; // only meaningful when started by the test above
    }
    if matches!(mode, SandboxMode::Bwrap | SandboxMode::Landlock) {
        host_sysv_ipc_is_out_of_reach(mode).await;
        mknod_makes_no_setid_files(mode).await;
        only_bounded_filesystems_take_writes(mode).await;
        no_capability_in_any_set(mode).await;
        file_notifications_reveal_nothing(mode).await;
        code_execute_stays_in_the_sandbox(mode).await;
        a_skill_s_scripts_run_from_every_folder(mode).await;
        a_skills_path_in_the_workspace_cannot_be_linked_out(mode).await;
    }
    a_locked_temp_dir_is_removed(mode).await;
    // code_execute as an engine that is not root runs it.
    code_execute_runs_code(mode).await;
    code_execute_timeout_kills_the_tree(mode).await;
    // The engine's user is the command's here (Landlock's scopes keep the server out
    // of its reach).
    commands_run_under_the_server(mode).await;
    the_server_is_out_of_the_commands_reach(mode).await;
    if matches!(mode, SandboxMode::Bwrap) && served() {
        // The kept sandbox of an engine that is not root: its commands, its server and
        // its supervisors all have the engine's uid.
        bwrap_commands_do_not_meet_at_all().await;
        a_kept_command_dies_with_its_supervisor_at_all().await;
        bwrap_covered_mounts_stay_covered_at_all().await;
    }
    if works(mode) {
        eprintln!(
            "unprivileged probe ran ({mode:?}, uid {})",
            rustix::process::geteuid().as_raw()
        );
    }
}

/// The shell group's one runner, as a tool whose implementation is a program calls it:
/// the arguments arrive on the command's stdin (here JSON, and 1 MiB that the command
/// must read whole while it writes), in every mode. Under the helper's backends, whose
/// own stdin is the engine's lifeline, the input is a file the helper opens for the
/// command; bubblewrap and a direct command get a pipe.
async fn run_sandboxed_feeds_stdin(mode: SandboxMode) {
    use klaw_tools::tools::shell::{SandboxedCommand, run_sandboxed};
    let Some(kit) = kit(mode) else { return };
    let ctx = kit.context();
    let run = |argv: &[&str], stdin: Vec<u8>| SandboxedCommand {
        argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        working_dir: None,
        stdin: Some(stdin),
        timeout: Duration::from_secs(30),
    };
    let args = r#"{"city": "Москва", "days": 3}"#.as_bytes().to_vec();
    let out = run_sandboxed(ctx, run(&["sh", "-c", "cat; echo; echo done"], args))
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert_eq!(
        out.stdout, "{\"city\": \"Москва\", \"days\": 3}\ndone\n",
        "{out:?}"
    );
    // A big input, echoed line by line while it is read: neither side stalls.
    let big = "x".repeat(1023) + "\n";
    let out = run_sandboxed(
        ctx,
        run(
            &["sh", "-c", "while read l; do echo \"$l\"; done | wc -c"],
            big.repeat(1024).into_bytes(),
        ),
    )
    .await
    .unwrap();
    assert_eq!(out.stdout.trim(), "1048576", "{out:?}");
    // No input: an empty stdin, as exec's commands have.
    let out = run_sandboxed(
        ctx,
        SandboxedCommand {
            stdin: None,
            ..run(&["sh", "-c", "cat | wc -c"], Vec::new())
        },
    )
    .await
    .unwrap();
    assert_eq!(out.stdout.trim(), "0", "{out:?}");
    // An empty program is refused before anything runs.
    let e = run_sandboxed(ctx, run(&[""], Vec::new()))
        .await
        .unwrap_err();
    assert!(e.message().contains("program is empty"), "{e:?}");
}
