//! MCP calls per second over Streamable HTTP: straight to one engine, through nginx to
//! one engine, and through nginx to three (Debian's nginx, configured as
//! `doc/scaling.md` shows, started here as the tests start it). Each client is one
//! session making `tools/call current_time` one after another on a kept-alive
//! connection; measured with one client, then with four at once.
//!
//! On a machine with two cores the engines, nginx and the clients share those cores: what
//! this shows is the cost of nginx's extra hop, not how three engines scale.
//!
//! `cargo bench -p klaw-engine --bench nginx` (needs `/usr/sbin/nginx`:
//! `scripts/setup-test-tools.sh`); `KLAW_BENCH_CALLS` calls per client (default 900:
//! below nginx's `keepalive_requests`, 1000, after which nginx closes a client's
//! connection and this client, which does not reconnect, would fail).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench: a panic is a failed run

#[path = "../tests/common/nginx.rs"]
mod nginx;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Instant;

use nginx::{Engine, Nginx};

/// A kept-alive HTTP/1.1 connection to `addr`, one MCP session on it.
struct Session {
    conn: BufReader<TcpStream>,
    addr: String,
    id: String,
    version: String,
    next: u64,
}

impl Session {
    fn post(&mut self, body: &str, session: bool) -> (String, String) {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if session {
            head.push_str(&format!(
                "Mcp-Session-Id: {}\r\nMCP-Protocol-Version: {}\r\n",
                self.id, self.version
            ));
        }
        head.push_str("\r\n");
        let s = self.conn.get_mut();
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        read_response(&mut self.conn)
    }

    fn open(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut me = Self {
            conn: BufReader::new(stream),
            addr: addr.to_owned(),
            id: String::new(),
            version: String::new(),
            next: 1,
        };
        let (head, body) = me.post(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#,
            false,
        );
        me.id = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| v.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no session id: {head}\n{body}"));
        me.version = body
            .split("\"protocolVersion\":\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("2025-06-18")
            .to_owned();
        me.post(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            true,
        );
        me
    }

    fn call(&mut self) {
        let id = self.next;
        self.next += 1;
        let (head, body) = self.post(
            &format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"current_time","arguments":{{"timezone":"UTC"}}}}}}"#
            ),
            true,
        );
        assert!(
            body.contains("\"result\"") && !body.contains("\"isError\":true"),
            "{head}\n{body}"
        );
    }
}

/// One response: its head and its body (by Content-Length or chunked).
fn read_response(r: &mut BufReader<TcpStream>) -> (String, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "connection closed");
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let lower = head.to_ascii_lowercase();
    let mut body = Vec::new();
    if lower.contains("transfer-encoding: chunked") {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(len) = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        body = vec![0; len];
        r.read_exact(&mut body).unwrap();
    }
    (head, String::from_utf8_lossy(&body).into_owned())
}

/// Calls per second of `clients` sessions at once on `addr`, `calls` each.
fn measure(addr: &str, clients: usize, calls: usize) -> f64 {
    // Warm up: a session and a few calls.
    let mut warm = Session::open(addr);
    for _ in 0..20 {
        warm.call();
    }
    let mut sessions: Vec<Session> = (0..clients).map(|_| Session::open(addr)).collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for session in &mut sessions {
            s.spawn(move || {
                for _ in 0..calls {
                    session.call();
                }
            });
        }
    });
    (clients * calls) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    if !Path::new(nginx::NGINX).exists() {
        eprintln!("nginx: skipped, /usr/sbin/nginx is not installed (scripts/setup-test-tools.sh)");
        return;
    }
    let calls: usize = std::env::var("KLAW_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(900);
    let bin = Path::new(env!("CARGO_BIN_EXE_klaw-engine"));
    let engines: Vec<Engine> = (0..3)
        .map(|i| Engine::start(bin, &format!("e{i}"), &[("KLAW_LOG_LEVEL", "error")]))
        .collect();
    let one = Nginx::start(&[&engines[0]]);
    let three = Nginx::start(&engines.iter().collect::<Vec<_>>());
    println!(
        "MCP tools/call current_time, {calls} calls per client (2 cores: the hop's cost, not scaling)"
    );
    for clients in [1, 4] {
        let direct = measure(&engines[0].addr, clients, calls);
        let via_one = measure(&one.addr, clients, calls);
        let via_three = measure(&three.addr, clients, calls);
        println!(
            "{clients} client(s): direct {direct:.0} calls/s | nginx, 1 engine {via_one:.0} calls/s ({:+.0}%) | nginx, 3 engines {via_three:.0} calls/s ({:+.0}%)",
            (via_one / direct - 1.0) * 100.0,
            (via_three / direct - 1.0) * 100.0,
        );
    }
}
