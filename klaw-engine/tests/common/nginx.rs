//! Engines behind a real nginx (Debian's package, installed by
//! `scripts/setup-test-tools.sh`): `klaw-engine mcp --http` processes, each named
//! (`storage.engineId`), and an nginx in front of them started by the test itself as
//! `nginx -p <tmp> -c <conf>` with `daemon off`, its pid and logs in its temporary
//! directory. The configuration is the one `doc/scaling.md` gives an operator: a
//! session's requests go to the engine its id names (a `map` of `Mcp-Session-Id`'s
//! prefix), a request without a session (an `initialize`) to any live engine.
//!
//! Both run under a supervisor tied to this process (as the test PostgreSQL): a test
//! killed however it dies leaves neither behind. Shared by the integration tests
//! (`mod common`) and the bench `benches/nginx.rs` (`#[path]`): std and tempfile only.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Debian's nginx.
pub const NGINX: &str = "/usr/sbin/nginx";

/// Runs `"$@"` and kills its process group when standard input (a pipe this process
/// holds) ends: this process dropped it or died. As the test PostgreSQL's supervisor.
const SUPERVISOR: &str = r#"exec 3<&0
"$@" </dev/null &
pid=$!
{ read -r _ <&3; kill -9 0; } &
wait "$pid"
kill -9 0
"#;

/// `cmd` under [`SUPERVISOR`], its own process group, stdin the supervisor's pipe.
fn supervised(cmd: &Command) -> Command {
    let mut sh = Command::new("sh");
    sh.args(["-c", SUPERVISOR, "sh"])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear()
        .stdin(Stdio::piped())
        .process_group(0);
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    sh
}

/// Kills the process group `child` leads and waits for it.
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.wait();
}

/// Whether Debian's nginx is installed; when it is not, says the test is skipped (under
/// CI, which installs it, that fails the test instead).
pub fn available() -> bool {
    if Path::new(NGINX).exists() {
        return true;
    }
    let why = "nginx is not installed (/usr/sbin/nginx): run scripts/setup-test-tools.sh";
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("skipping: {why}");
    false
}

/// A `klaw-engine mcp --http 127.0.0.1:0` named `name`; killed (its group) when dropped.
pub struct Engine {
    pub name: String,
    pub addr: String,
    child: Option<Child>,
    pid: Option<u32>,
    pub log: Arc<Mutex<String>>,
    _home: tempfile::TempDir,
}

impl Engine {
    /// Starts `bin` (`klaw-engine`) named `name`, with `env` besides, and waits until it
    /// listens.
    pub fn start(bin: &Path, name: &str, env: &[(&str, &str)]) -> Self {
        let home = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(bin);
        cmd.args(["mcp", "--http", "127.0.0.1:0"])
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TZ", "UTC")
            .env("KLAW_DATA", home.path().join("data"))
            .env("KLAW_WORKSPACE", home.path().join("ws"))
            .env("KLAW_ENGINE_ID", name)
            .env("KLAW_LOG_LEVEL", "warn");
        if let Some(cache) = std::env::var_os("KLAW_CACHE") {
            cmd.env("KLAW_CACHE", cache);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        std::fs::create_dir_all(home.path().join("ws")).unwrap();
        let mut sh = supervised(&cmd);
        let mut child = sh
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                panic!("engine {name} exits before listening:\n{seen}");
            };
            seen.push_str(&line);
            seen.push('\n');
            if let Some(url) = line.strip_prefix("klaw-engine: MCP over HTTP at http://") {
                break url.trim_end_matches("/mcp").to_owned();
            }
        };
        let log = Arc::new(Mutex::new(seen));
        let kept = Arc::clone(&log);
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let mut k = kept.lock().unwrap();
                k.push_str(&l);
                k.push('\n');
            }
        });
        // The engine itself: the supervisor's child.
        let pid =
            std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .find(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .is_ok_and(|c| c.trim() == "klaw-engine")
                });
        Self {
            name: name.to_owned(),
            addr,
            child: Some(child),
            pid,
            log,
            _home: home,
        }
    }

    /// `kill -9` of the engine alone (not its supervisor): as a crash would, its
    /// connections closed by the kernel. Waits until it is gone.
    pub fn kill_9(&mut self) {
        let pid = self.pid.expect("the engine's pid");
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
        }) {
            assert!(
                Instant::now() < deadline,
                "engine {} does not die",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(mut c) = self.child.take() {
            kill_group(&mut c);
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_group(&mut c);
        }
    }
}

/// A free loopback port (bound, then let go: nginx takes it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The nginx configuration in front of `engines` (`(name, address)`), listening on
/// `port`, with its files under `prefix`: what `doc/scaling.md` shows.
pub fn config(prefix: &Path, port: u16, engines: &[(&str, &str)]) -> String {
    let servers: String = engines
        .iter()
        .map(|(_, a)| format!("        server {a} max_fails=1 fail_timeout=10s;\n"))
        .collect();
    let routes: String = engines
        .iter()
        .map(|(n, a)| format!("        \"~^{n}\\.\" {a};\n"))
        .collect();
    let p = prefix.display();
    format!(
        r#"daemon off;
worker_processes 1;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {p}/body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    # A request without a session (initialize) goes to any live engine.
    upstream klaw_engines {{
{servers}        keepalive 16;
    }}
    # A session's requests go to the engine its id names (`<engineId>.<uuid>`).
    map $http_mcp_session_id $klaw_engine {{
        default klaw_engines;
{routes}    }}
    server {{
        listen 127.0.0.1:{port};
        location /mcp {{
            proxy_pass http://$klaw_engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            # Server-sent events go through as they come.
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 1h;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"#
    )
}

/// A running nginx; killed (its group) when dropped.
pub struct Nginx {
    pub addr: String,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// nginx in front of `engines`, listening on a free loopback port; waits until it
    /// answers.
    pub fn start(engines: &[&Engine]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("klaw-nginx")
            .tempdir()
            .unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755));
        }
        let port = free_port();
        let named: Vec<(&str, &str)> = engines
            .iter()
            .map(|e| (e.name.as_str(), e.addr.as_str()))
            .collect();
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, config(dir.path(), port, &named)).unwrap();
        let mut cmd = Command::new(NGINX);
        cmd.arg("-p").arg(dir.path()).arg("-c").arg(&conf);
        let mut sh = supervised(&cmd);
        sh.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        let child = sh
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let me = Self {
            addr: format!("127.0.0.1:{port}"),
            child: Some(child),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&me.addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx never listened: {}",
                me.error_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        me
    }

    /// The MCP endpoint through nginx.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// nginx's error log.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// Its directory (configuration, pid, logs).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_group(&mut c);
        }
    }
}
