//! The MCP client side of one imported server: the [`Link`] its tools call through, the
//! rmcp handler that receives the server's notifications (progress, log messages,
//! `tools/list_changed`), and starting the transport (a child process in its own
//! process group, or Streamable HTTP).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use klaw_tools::Progress;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::AsyncBufReadExt;

use crate::config::ImportedServer;

/// The engine's variables a stdio server gets (beside its own `env`): those the MCP
/// SDKs' stdio clients pass on (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`), and
/// the locale, time zone and temporary directory. Anything else, `${VAR}` in `env`.
pub(crate) const INHERITED_ENV: [&str; 10] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR",
];

/// Lines of a server's stderr kept to explain why it stopped.
const STDERR_LINES: usize = 5;
/// Longest stderr line kept or logged (the rest is cut).
const STDERR_LINE_CHARS: usize = 500;

/// What an imported server's tools share: the connection while the server is up, the
/// progress reporters of the calls in flight, and why it is down.
pub(crate) struct Link {
    /// The server's name in `mcpServers`.
    pub(crate) server: String,
    peer: RwLock<Option<Peer<RoleClient>>>,
    progress: Mutex<Watches>,
    down: Mutex<String>,
    stderr: Mutex<VecDeque<String>>,
    /// Woken by the server's `notifications/tools/list_changed`.
    pub(crate) list_changed: tokio::sync::Notify,
}

impl Link {
    pub(crate) fn new(server: &str) -> Arc<Self> {
        Arc::new(Self {
            server: server.to_owned(),
            peer: RwLock::new(None),
            progress: Mutex::new(Watches::default()),
            down: Mutex::new("it is starting".into()),
            stderr: Mutex::new(VecDeque::new()),
            list_changed: tokio::sync::Notify::new(),
        })
    }

    /// The connection, or why there is none (for an `unavailable` error).
    pub(crate) fn peer(&self) -> Result<Peer<RoleClient>, String> {
        self.peer
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                self.down
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
            })
    }

    pub(crate) fn set_up(&self, peer: Peer<RoleClient>) {
        *self.peer.write().unwrap_or_else(PoisonError::into_inner) = Some(peer);
    }

    pub(crate) fn set_down(&self, why: String) {
        *self.peer.write().unwrap_or_else(PoisonError::into_inner) = None;
        *self.down.lock().unwrap_or_else(PoisonError::into_inner) = why;
    }

    /// The last lines the server wrote on stderr, joined (empty when none).
    pub(crate) fn last_stderr(&self) -> String {
        let lines = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().cloned().collect::<Vec<_>>().join(" | ")
    }

    /// Sends the server's progress reports for `token` to `progress` until the guard
    /// is dropped.
    pub(crate) fn watch_progress(
        self: &Arc<Self>,
        token: ProgressToken,
        progress: Progress,
    ) -> ProgressGuard {
        if progress.is_listened() {
            let early = {
                let mut watches = self.lock_progress();
                watches.by_token.insert(token.clone(), progress.clone());
                let (mine, others) = std::mem::take(&mut watches.early)
                    .into_iter()
                    .partition(|p| p.progress_token == token);
                watches.early = others;
                mine
            };
            for p in early {
                report(&progress, p);
            }
        }
        ProgressGuard {
            link: Arc::clone(self),
            token,
        }
    }

    fn lock_progress(&self) -> std::sync::MutexGuard<'_, Watches> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets what an earlier run of the server wrote on stderr.
    pub(crate) fn clear_stderr(&self) {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn keep_stderr(&self, line: String) {
        let mut lines = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

/// The calls whose progress is watched, and reports for no watched call yet.
#[derive(Default)]
struct Watches {
    by_token: HashMap<ProgressToken, Progress>,
    early: VecDeque<ProgressNotificationParam>,
}

/// Reports kept for calls not watched yet (the oldest dropped first).
const EARLY_REPORTS: usize = 32;

fn report(progress: &Progress, p: ProgressNotificationParam) {
    progress.report(
        whole(p.progress),
        p.total.map(whole),
        p.message.map(|m| cut(&m, 1000)).unwrap_or_default(),
    );
}

/// Stops a call's progress reports when the call ends, however it ends.
pub(crate) struct ProgressGuard {
    link: Arc<Link>,
    token: ProgressToken,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.link.lock_progress().by_token.remove(&self.token);
    }
}

/// Receives what the server sends unasked.
pub(crate) struct Handler {
    link: Arc<Link>,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let progress = {
            let mut watches = self.link.lock_progress();
            match watches.by_token.get(&params.progress_token) {
                Some(p) => Some(p.clone()),
                None => {
                    // A report that arrived before its call was watched (the call is
                    // sent, then watched): kept a little while for it.
                    if watches.early.len() == EARLY_REPORTS {
                        watches.early.pop_front();
                    }
                    watches.early.push_back(params.clone());
                    None
                }
            }
        };
        if let Some(progress) = progress {
            report(&progress, params);
        }
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.link.list_changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("klaw-engine", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A running connection to a server.
pub(crate) type Connection = RunningService<RoleClient, Handler>;

/// A server's settings with `${VAR}` expanded: what starting it takes.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub(crate) server: ImportedServer,
}

impl Resolved {
    /// `server` with `${VAR}` (and `${VAR:-default}`) in `command`, `args`, `env`,
    /// `url` and `headers` replaced from `vars`; an unset variable without a default is
    /// an error naming it.
    pub(crate) fn new(
        server: &ImportedServer,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let x = |s: &str| expand(s, vars);
        let mut s = server.clone();
        s.command = s.command.as_deref().map(x).transpose()?;
        s.args = s.args.iter().map(|a| x(a)).collect::<Result<_, _>>()?;
        s.url = s.url.as_deref().map(x).transpose()?;
        for v in s.env.values_mut().chain(s.headers.values_mut()) {
            *v = x(v)?;
        }
        Ok(Self { server: s })
    }

    /// Starts the server and completes `initialize` (the caller bounds the time).
    pub(crate) async fn connect(&self, link: &Arc<Link>) -> Result<Connection, String> {
        let handler = Handler {
            link: Arc::clone(link),
        };
        let s = &self.server;
        if s.is_http() {
            connect_http(s, handler).await
        } else {
            connect_stdio(s, handler, link).await
        }
    }
}

async fn connect_stdio(
    s: &ImportedServer,
    handler: Handler,
    link: &Arc<Link>,
) -> Result<Connection, String> {
    use process_wrap::tokio::{CommandWrap, ProcessGroup};
    let program = s.command.as_deref().unwrap_or_default();
    let mut command = tokio::process::Command::new(program);
    // Not the engine's whole environment (it holds API keys and tokens): the variables
    // the MCP SDKs pass on, then the server's own `env`.
    command.env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.args(&s.args).envs(&s.env).kill_on_drop(true);
    if let Some(cwd) = &s.cwd {
        command.current_dir(cwd);
    }
    // Its own process group: the stop's SIGTERM and kill reach what it started too.
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader());
    // rmcp's transport over the child's pipes, with over-deep messages cut first.
    let (transport, stderr) = super::stdio::ChildTransport::spawn(wrapped)
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    if let Some(stderr) = stderr {
        let link = Arc::clone(link);
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            // A line that is not UTF-8 or too long ends the copy; the server goes on.
            while let Ok(Some(line)) = lines.next_line().await {
                let line = cut(&line, STDERR_LINE_CHARS);
                tracing::info!(target: "klaw::imports", server = link.server, "stderr: {line}");
                link.keep_stderr(line);
            }
        });
    }
    handler
        .serve(transport)
        .await
        .map_err(|e| format!("initialize failed: {e}"))
}

async fn connect_http(s: &ImportedServer, handler: Handler) -> Result<Connection, String> {
    use reqwest::header::{HeaderName, HeaderValue};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = s.url.as_deref().unwrap_or_default();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("{url:?} is not an http:// or https:// URL"));
    }
    let mut headers = HashMap::new();
    for (k, v) in &s.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("the header name {k:?} is not valid"))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| format!("the value of the header {k:?} is not valid"))?;
        headers.insert(name, value);
    }
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    handler
        .serve(transport)
        .await
        .map_err(|e| format!("initialize failed: {e}"))
}

/// `${VAR}` and `${VAR:-default}` in `s` replaced from `vars`.
fn expand(s: &str, vars: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("`${{` without `}}` in {s:?}"));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let value = vars(name)
            .filter(|v| !v.is_empty() || default.is_none())
            .or_else(|| default.map(str::to_owned))
            .ok_or_else(|| format!("the variable `{name}` is not set (used as `${{{inner}}}`)"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A progress number as a whole count (MCP's are any non-negative number).
fn whole(n: f64) -> u64 {
    if n.is_finite() && n > 0.0 {
        // Saturating: a huge value becomes u64::MAX.
        n as u64
    } else {
        0
    }
}

/// At most `max` characters of `s`, with `…` when cut.
pub(crate) fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("sk-1".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_are_expanded() {
        assert_eq!(expand("Bearer ${TOKEN}", &vars).unwrap(), "Bearer sk-1");
        assert_eq!(expand("${NOPE:-x}/${TOKEN}", &vars).unwrap(), "x/sk-1");
        assert_eq!(expand("${EMPTY:-d}", &vars).unwrap(), "d");
        assert_eq!(expand("${EMPTY}", &vars).unwrap(), "");
        assert_eq!(expand("no vars $HOME", &vars).unwrap(), "no vars $HOME");
        let e = expand("${NOPE}", &vars).unwrap_err();
        assert!(e.contains("`NOPE` is not set"), "{e}");
        assert!(expand("${TOKEN", &vars).is_err());
    }

    #[test]
    fn progress_numbers_from_a_server_never_panic() {
        assert_eq!(whole(f64::NAN), 0);
        assert_eq!(whole(-3.0), 0);
        assert_eq!(whole(2.7), 2);
        assert_eq!(whole(f64::INFINITY), 0);
        assert_eq!(whole(1e30), u64::MAX);
    }

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("привет", 3), "при…");
        assert_eq!(cut("ok", 3), "ok");
    }
}
