//! The proxy every request of `render_js`'s browser goes through: an HTTP proxy on
//! loopback that applies the [`Guard`] to each request (`CONNECT host:port` for https and
//! WebSockets, absolute-form requests for http), connects to the checked address itself
//! and answers `403` with the reason otherwise. The browser is started with this proxy
//! for every address, loopback included, so a page's script cannot reach a private
//! address either, and DNS rebinding gains nothing: the proxy resolves, checks and
//! connects in one place.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use url::{Host, Url};

use super::guard::{Guard, Refused};

/// Longest request head read.
const MAX_HEAD: usize = 64 * 1024;

/// A running proxy; stops when dropped.
pub(crate) struct Proxy {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    refused: Arc<Mutex<Vec<String>>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Starts the proxy on a free loopback port.
    pub(crate) async fn start(guard: Arc<Guard>, timeout: Duration) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let refused = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&refused);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let guard = Arc::clone(&guard);
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    if let Err(why) = serve(client, &guard, timeout).await {
                        tracing::debug!(target: "klaw::web", "render_js proxy refused a request: {why}");
                        if let Ok(mut l) = log.lock() {
                            l.push(why);
                        }
                    }
                });
            }
        });
        Ok(Self {
            addr,
            task,
            refused,
        })
    }

    /// `http://127.0.0.1:PORT`, for the browser's `--proxy-server`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The refusals since the last call (why each request was not made).
    pub(crate) fn take_refused(&self) -> Vec<String> {
        self.refused
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }
}

/// One client connection: one request, tunnelled or forwarded, then closed.
async fn serve(mut client: TcpStream, guard: &Guard, timeout: Duration) -> Result<(), String> {
    let (head, rest) = tokio::time::timeout(Duration::from_secs(10), read_head(&mut client))
        .await
        .map_err(|_| "no request head within 10 s".to_owned())??;
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (method, target, version) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or("HTTP/1.1"),
    );
    let connect = method.eq_ignore_ascii_case("CONNECT");
    let url = if connect {
        Url::parse(&format!("https://{target}/"))
    } else {
        Url::parse(target)
    }
    .map_err(|e| format!("`{target}` is not a URL: {e}"))?;
    let upstream = match open(guard, &url, timeout).await {
        Ok(s) => s,
        Err(why) => {
            let body = format!("refused by Klaw: {why}\n");
            let _ = client
                .write_all(
                    format!(
                        "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
            return Err(format!("{target}: {why}"));
        }
    };
    let mut upstream = upstream;
    if connect {
        client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .map_err(|e| e.to_string())?;
    } else {
        // Origin form, and one request per connection (the next may go elsewhere).
        let path = &url[url::Position::BeforePath..url::Position::AfterQuery];
        let mut out = format!("{method} {path} {version}\r\n");
        for line in lines.filter(|l| !l.is_empty()) {
            let name = line.split(':').next().unwrap_or_default().trim();
            if [
                "connection",
                "proxy-connection",
                "proxy-authorization",
                "keep-alive",
            ]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h))
            {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        out.push_str("Connection: close\r\n\r\n");
        upstream
            .write_all(out.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
    }
    upstream.write_all(&rest).await.map_err(|e| e.to_string())?;
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    Ok(())
}

/// The request head (up to the blank line, without it) and the bytes read after it.
async fn read_head(client: &mut TcpStream) -> Result<(String, Vec<u8>), String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            buf.truncate(end);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > MAX_HEAD {
            return Err("request head over 64 KiB".into());
        }
        let n = client.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the client closed the connection".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A connection to `url`'s host and port, to an address the guard let through.
async fn open(guard: &Guard, url: &Url, timeout: Duration) -> Result<TcpStream, String> {
    guard.check(url).map_err(|e| e.to_string())?;
    let port = url.port_or_known_default().unwrap_or(80);
    let ips: Vec<IpAddr> = match url.host() {
        Some(Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
        Some(Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
        Some(Host::Domain(name)) => guard.resolve(name).await.map_err(|e| e.to_string())?,
        None => return Err(Refused::NoHost.to_string()),
    };
    let mut last = String::from("no address");
    for ip in ips {
        match tokio::time::timeout(timeout, TcpStream::connect(SocketAddr::new(ip, port))).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = "timed out".into(),
        }
    }
    Err(format!("cannot connect: {last}"))
}
