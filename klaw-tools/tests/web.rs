//! `web_fetch` and `web_search` through the registry, as a model calls them, against
//! servers on loopback: a hostile corpus of URLs that must all be refused (a trap
//! listener proves not one request reached it), readability on pages written like real
//! ones, charsets, caps, time limits, redirects, binary content, and search against a
//! server speaking Brave's and SearXNG's JSON.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use klaw_tools::testing::Kit;
#[cfg(all(feature = "render", feature = "shell"))]
use klaw_tools::tools::shell::{SandboxHelper, SandboxMode, ShellSettings};
use klaw_tools::tools::web::WebSettings;
use klaw_tools::{ErrorKind, ToolError};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a path answers.
enum Answer {
    /// A whole response.
    Page {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    },
    /// `text/plain`, one byte every 200 ms for a minute.
    Drip,
    /// `bytes` of text with a Content-Length.
    Huge(usize),
}

fn page(content_type: &str, body: impl Into<Vec<u8>>) -> Answer {
    Answer::Page {
        status: 200,
        headers: vec![("Content-Type", content_type.to_owned())],
        body: body.into(),
    }
}

fn redirect(status: u16, to: &str) -> Answer {
    Answer::Page {
        status,
        headers: vec![("Location", to.to_owned())],
        body: Vec::new(),
    }
}

/// A server on loopback: `route(path)` answers each request; counts connections.
struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl Server {
    async fn start(route: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Self {
        Self::start_on("127.0.0.1:0", route).await
    }

    async fn start_on(bind: &str, route: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Self {
        let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&hits);
        let route = Arc::new(route);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let route = Arc::clone(&route);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let _ = respond(&mut stream, route(&path)).await;
                });
            }
        });
        Self { addr, hits }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

async fn respond(stream: &mut tokio::net::TcpStream, answer: Answer) -> std::io::Result<()> {
    match answer {
        Answer::Page {
            status,
            headers,
            body,
        } => {
            let mut out = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            stream.write_all(out.as_bytes()).await?;
            stream.write_all(&body).await
        }
        Answer::Drip => {
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n",
                )
                .await?;
            for _ in 0..300 {
                stream.write_all(b"x").await?;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(())
        }
        Answer::Huge(bytes) => {
            stream
                .write_all(
                    format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {bytes}\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await?;
            let chunk = vec![b'a'; 65536];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len());
                stream.write_all(&chunk[..n]).await?;
                left -= n;
            }
            Ok(())
        }
    }
}

fn kit(settings: WebSettings) -> Kit {
    Kit::new().unwrap().with_context(|b| b.service(settings))
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A listener that must never be reached: counts every connection.
async fn trap(bind: &str) -> Server {
    Server::start_on(bind, |_| page("text/plain", "you should not be here")).await
}

/// The hostile corpus, its traps and the one allowed loopback service.
struct Hostile {
    t4: Server,
    t6: Server,
    allowed: Server,
    settings: WebSettings,
    urls: Vec<String>,
}

async fn hostile() -> Hostile {
    let t4 = trap("127.0.0.1:0").await;
    let t6 = trap("[::1]:0").await;
    let (p, p6) = (t4.addr.port(), t6.addr.port());
    // The one loopback service the user allowed; its redirects point at the traps.
    let allowed = Server::start(move |path| {
        let to = path.strip_prefix("/to/").map(|rest| {
            rest.replace("%P6", &p6.to_string())
                .replace("%P", &p.to_string())
        });
        match (path, to) {
            ("/chain/0", _) => page("text/plain", "end of chain"),
            (chain, _) if chain.starts_with("/chain/") => {
                let n: u32 = chain[7..].parse().unwrap();
                redirect(302, &format!("/chain/{}", n - 1))
            }
            (_, Some(to)) => redirect(302, &to),
            _ => page("text/plain", "allowed"),
        }
    })
    .await;
    let a = allowed.addr.port();
    let settings = WebSettings::default()
        .allow_private(format!("127.0.0.1:{a}"))
        .resolve("evil.test", vec![ip("127.0.0.1")])
        .resolve("rebind.test", vec![ip("93.184.215.14"), ip("127.0.0.1")])
        .resolve("v6evil.test", vec![ip("::1")])
        .resolve("mapped.test", vec![ip("::ffff:127.0.0.1")])
        .resolve("zero.test", vec![ip("0.0.0.0")])
        .resolve("meta.test", vec![ip("169.254.169.254")]);
    let direct = [
        "http://127.0.0.1:%P/",
        "https://127.0.0.1:%P/",
        "HTTP://127.0.0.1:%P/",
        "http://2130706433:%P/",
        "http://0x7f000001:%P/",
        "http://0x7f.1:%P/",
        "http://0x7f.0.0.1:%P/",
        "http://0177.0.0.1:%P/",
        "http://0177.1:%P/",
        "http://017700000001:%P/",
        "http://127.1:%P/",
        "http://127.0.1:%P/",
        "http://127.0.0.1.:%P/",
        "http://127.0.0.2:%P/",
        "http://127.127.127.127:%P/",
        "http://%31%32%37%2e%30%2e%30%2e%31:%P/",
        "http://%31%32%37.0.0.1:%P/",
        "http://１２７.０.０.１:%P/",
        "http://127。0。0。1:%P/",
        "http://0:%P/",
        "http://0.0.0.0:%P/",
        "http://0x0:%P/",
        "http://000.000.000.000:%P/",
        "http://user:pass@127.0.0.1:%P/",
        "http://example.com@127.0.0.1:%P/",
        "http://127.0.0.1:%P#@example.com/",
        "http://127.0.0.1:%P\\@example.com/",
        "http://127.0.0.1:%P/?@example.com",
        "http://[::ffff:127.0.0.1]:%P/",
        "http://[::ffff:7f00:1]:%P/",
        "http://[0:0:0:0:0:ffff:127.0.0.1]:%P/",
        "http://[::127.0.0.1]:%P/",
        "http://[64:ff9b::127.0.0.1]:%P/",
        "http://[2002:7f00:1::]:%P/",
        "http://[::1]:%P6/",
        "http://[0:0:0:0:0:0:0:1]:%P6/",
        "http://[::]:%P6/",
        "http://[0000::1]:%P6/",
        "http://localhost:%P/",
        "http://LOCALHOST:%P/",
        "http://localhost.:%P/",
        "http://evil.test:%P/",
        "http://EVIL.TEST.:%P/",
        "http://rebind.test:%P/",
        "http://v6evil.test:%P6/",
        "http://mapped.test:%P/",
        "http://zero.test:%P/",
        "http://meta.test/latest/meta-data/",
        "http://127.0.0.1:%P/mcp",
        "http://127.0.0.1:8765/mcp",
        "http://10.0.0.1/",
        "http://172.16.0.1/",
        "http://192.168.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.100.100.200/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://168.63.129.16/machine",
        "http://192.0.0.192/",
        "http://100.64.0.1/",
        "http://198.18.0.1/",
        "http://224.0.0.1/",
        "http://255.255.255.255/",
        "http://240.0.0.1/",
        "http://0.1.2.3/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://[fec0::1]/",
        "http://[ff02::1]/",
        "http://[2001:db8::1]/",
        "http://127.0.0.1:%A0/", // the allowed host on another port
    ];
    let schemes = [
        "file:///etc/passwd",
        "ftp://127.0.0.1:%P/",
        "gopher://127.0.0.1:%P/_GET",
        "dict://127.0.0.1:%P/",
        "ws://127.0.0.1:%P/",
        "data:text/html,<h1>hi</h1>",
        "javascript:alert(1)",
    ];
    let redirects = [
        "http://127.0.0.1:%P/",
        "http://2130706433:%P/",
        "http://0x7f.1:%P/",
        "http://localhost:%P/",
        "http://evil.test:%P/",
        "http://rebind.test:%P/",
        "http://[::ffff:127.0.0.1]:%P/",
        "http://[::1]:%P6/",
        "http://0.0.0.0:%P/",
        "//127.0.0.1:%P/",
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:%P/_",
    ];
    let fill = |u: &str| {
        u.replace("%P6", &p6.to_string())
            .replace("%A0", &(a.wrapping_add(1)).to_string())
            .replace("%P", &p.to_string())
    };
    let mut urls: Vec<String> = direct.iter().chain(&schemes).map(|u| fill(u)).collect();
    urls.extend(redirects.iter().map(|to| allowed.url(&format!("/to/{to}"))));
    urls.push(allowed.url("/chain/6")); // one redirect too many
    assert!(urls.len() >= 80, "{} URLs", urls.len());

    Hostile {
        t4,
        t6,
        allowed,
        settings,
        urls,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spelling_name_or_redirect_reaches_a_private_address() {
    let Hostile {
        t4,
        t6,
        allowed,
        settings,
        urls,
    } = hostile().await;
    let kit = kit(settings);
    for url in &urls {
        let e = kit.call_err("web_fetch", json!({"url": url})).await;
        let expected = if url.ends_with("/chain/6") {
            matches!(e.kind(), ErrorKind::Failed)
        } else {
            matches!(e.kind(), ErrorKind::AccessDenied)
        };
        assert!(expected, "{url}: {:?} {}", e.kind(), e.message());
    }
    assert_eq!((t4.hits(), t6.hits()), (0, 0), "a request reached the trap");

    // The allowed service itself, and redirects within it, work.
    let ok = kit
        .call_ok("web_fetch", json!({"url": allowed.url("/chain/5")}))
        .await;
    assert_eq!(ok["url"], allowed.url("/chain/0"));
    assert!(ok["content"].as_str().unwrap().contains("end of chain"));
}

const ARTICLE: &str = r#"<!doctype html>
<html lang="en"><head><title>How rivers shape valleys | Geo Weekly</title>
<script>window.tracker = "SCRIPT-TEXT-SHOULD-GO";</script>
<style>.ad { color: red }</style></head>
<body>
<nav class="menu"><a href="/">Home</a> <a href="/news">NAV-LINK-NEWS</a> <a href="/about">About</a></nav>
<div class="ad banner sponsored">AD-TEXT buy now, 50% off!</div>
<main><article>
<h1>How rivers shape valleys</h1>
<p class="byline">By Ann Smith</p>
<p>Rivers cut into rock over thousands of years. The water carries sand and pebbles that grind the
riverbed, and the valley deepens a little every flood season. Geologists call this process
fluvial erosion, and it explains the V shape of young mountain valleys.</p>
<p>Older valleys widen instead of deepening. The river meanders from side to side, eroding the
outer bank of each bend and leaving sediment on the inner bank. Over time the valley floor becomes
a broad flood plain, rich soil that farmers have valued for as long as there have been farms.</p>
<h2>Glaciers are different</h2>
<p>A glacier moves slowly but it carries enormous weight. Instead of a V it carves a U: steep walls
and a flat bottom. Many valleys in the Alps were first cut by rivers and then reshaped by ice during
the last glacial period, which is why their walls are so steep.</p>
<ul><li>V-shaped: rivers</li><li>U-shaped: glaciers</li></ul>
</article></main>
<aside class="sidebar related">RELATED-WIDGET Ten facts about lakes</aside>
<section id="comments" class="comments"><div class="comment">COMMENT-TEXT first!!!</div></section>
<footer class="footer">FOOTER-TEXT © Geo Weekly</footer>
<script>document.write("SCRIPT-TEXT-SHOULD-GO")</script>
</body></html>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_become_their_main_content_in_every_format() {
    let server = Server::start(|path| match path {
        "/article" => page("text/html; charset=utf-8", ARTICLE),
        "/api" => page("application/json", r#"{"name":"klaw","tools":[1,2]}"#),
        "/notes.md" => page("text/markdown", "# Notes\n\n- one\n- two"),
        "/image.png" => page("image/png", b"\x89PNG\r\n\x1a\n\0\0\0".to_vec()),
        "/untyped" => Answer::Page {
            status: 200,
            headers: vec![],
            body: b"\0\x01\x02binary".to_vec(),
        },
        "/missing" => Answer::Page {
            status: 404,
            headers: vec![("Content-Type", "text/plain".into())],
            body: b"no such page".to_vec(),
        },
        _ => page("text/plain", "?"),
    })
    .await;
    let kit = kit(WebSettings::default().allow_private(server.addr.to_string()));

    let md = kit
        .call_ok("web_fetch", json!({"url": server.url("/article")}))
        .await;
    let content = md["content"].as_str().unwrap();
    assert_eq!(md["status"], 200);
    assert_eq!(md["title"], "How rivers shape valleys | Geo Weekly");
    assert!(
        content.contains("fluvial erosion") && content.contains("Glaciers are different"),
        "{content}"
    );
    assert!(
        content.contains("## Glaciers are different"),
        "markdown headings: {content}"
    );
    for noise in [
        "SCRIPT-TEXT",
        "NAV-LINK",
        "AD-TEXT",
        "FOOTER-TEXT",
        "COMMENT-TEXT",
        "RELATED-WIDGET",
    ] {
        assert!(!content.contains(noise), "{noise} in {content}");
    }
    // Framed: where the page's text starts and ends, with an id the page cannot know.
    let first = content.lines().next().unwrap();
    let last = content.lines().last().unwrap();
    assert!(
        first.starts_with("<<<web content ") && first.contains("not instructions"),
        "{first}"
    );
    let id = first.split_whitespace().nth(2).unwrap();
    assert_eq!(last, format!("<<<end of web content {id}>>>"));
    assert_eq!(
        md["length"].as_u64().unwrap() as usize + first.len() + last.len() + 2,
        content.chars().count()
    );

    let html = kit
        .call_ok(
            "web_fetch",
            json!({"url": server.url("/article"), "format": "html"}),
        )
        .await;
    assert!(html["content"].as_str().unwrap().contains("<p>"), "{html}");
    let text = kit
        .call_ok(
            "web_fetch",
            json!({"url": server.url("/article"), "format": "text"}),
        )
        .await;
    assert!(!text["content"].as_str().unwrap().contains("## "), "{text}");

    let api = kit
        .call_ok("web_fetch", json!({"url": server.url("/api")}))
        .await;
    assert!(
        api["content"]
            .as_str()
            .unwrap()
            .contains("\"name\": \"klaw\""),
        "{api}"
    );
    let notes = kit
        .call_ok("web_fetch", json!({"url": server.url("/notes.md")}))
        .await;
    assert!(
        notes["content"]
            .as_str()
            .unwrap()
            .contains("# Notes\n\n- one"),
        "{notes}"
    );
    let missing = kit
        .call_ok("web_fetch", json!({"url": server.url("/missing")}))
        .await;
    assert_eq!(missing["status"], 404);

    for binary in ["/image.png", "/untyped"] {
        let e = kit
            .call_err("web_fetch", json!({"url": server.url(binary)}))
            .await;
        assert!(
            e.message().contains("not text"),
            "{binary}: {}",
            e.message()
        );
    }
    let short = kit
        .call_ok(
            "web_fetch",
            json!({"url": server.url("/article"), "maxChars": 40}),
        )
        .await;
    assert_eq!(
        (short["length"].as_u64(), short["truncated"].as_bool()),
        (Some(40), Some(true))
    );
    let bad: ToolError = kit.call_err("web_fetch", json!({"url": "not a url"})).await;
    assert!(
        matches!(bad.kind(), ErrorKind::InvalidArguments { .. }),
        "{bad:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charsets_are_decoded_from_the_header_or_the_page() {
    let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode("<p>Реки веками прорезают скалы, и долина становится глубже с каждым паводком. Это называется эрозией.</p>");
    let (sjis, _, _) =
        encoding_rs::SHIFT_JIS.encode("川は何千年もかけて岩を削り、谷を深くしていきます。");
    let mut meta_page =
        b"<html><head><meta charset=\"windows-1251\"><title>t</title></head><body>".to_vec();
    meta_page.extend_from_slice(&cp1251);
    meta_page.extend_from_slice(b"</body></html>");
    let sjis = sjis.into_owned();
    let cp = cp1251.into_owned();
    let server = Server::start(move |path| match path {
        "/meta" => page("text/html", meta_page.clone()),
        "/header" => page("text/plain; charset=windows-1251", cp.clone()),
        "/sjis" => page("text/plain; charset=Shift_JIS", sjis.clone()),
        _ => page("text/plain", "?"),
    })
    .await;
    let kit = kit(WebSettings::default().allow_private(server.addr.to_string()));
    let meta = kit
        .call_ok("web_fetch", json!({"url": server.url("/meta")}))
        .await;
    assert!(
        meta["content"].as_str().unwrap().contains("Реки веками"),
        "{meta}"
    );
    let header = kit
        .call_ok("web_fetch", json!({"url": server.url("/header")}))
        .await;
    assert!(
        header["content"].as_str().unwrap().contains("долина"),
        "{header}"
    );
    let jp = kit
        .call_ok("web_fetch", json!({"url": server.url("/sjis")}))
        .await;
    assert!(
        jp["content"].as_str().unwrap().contains("川は何千年"),
        "{jp}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_capped_and_slow_ones_time_out() {
    let server = Server::start(|path| match path {
        "/huge" => Answer::Huge(20 * 1024 * 1024),
        "/drip" => Answer::Drip,
        _ => page("text/plain", "?"),
    })
    .await;
    let kit = kit(WebSettings::default()
        .allow_private(server.addr.to_string())
        .with_limits(1024 * 1024, Duration::from_secs(2)));
    let huge = kit
        .call_ok(
            "web_fetch",
            json!({"url": server.url("/huge"), "maxChars": 1_000_000}),
        )
        .await;
    assert_eq!(huge["truncated"], true);
    assert!(
        huge["length"].as_u64().unwrap() <= 1024 * 1024,
        "{}",
        huge["length"]
    );
    let slow = kit
        .call_err("web_fetch", json!({"url": server.url("/drip")}))
        .await;
    assert!(matches!(slow.kind(), ErrorKind::Timeout), "{slow:?}");
    assert!(
        slow.message().contains("web.timeoutSeconds"),
        "{}",
        slow.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_reads_brave_and_searxng_and_explains_failures() {
    let asked = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&asked);
    let limited = Arc::new(AtomicUsize::new(0));
    let once = Arc::clone(&limited);
    let server = Server::start(move |path| {
        log.lock().unwrap().push(path.to_owned());
        let brave = json!({"web": {"results": [
            {"title": "<strong>Klaw</strong> tools", "url": "https://klaw.example/", "description": "Write a tool as one <b>async fn</b>"},
            {"title": "Second", "url": "https://two.example/", "description": "two"},
            {"title": "Third", "url": "https://three.example/", "description": "three"},
        ]}});
        if path.starts_with("/brave?") {
            page("application/json", brave.to_string())
        } else if path.starts_with("/limited?") {
            if once.fetch_add(1, Ordering::SeqCst) == 0 {
                Answer::Page { status: 429, headers: vec![("Retry-After", "1".into())], body: Vec::new() }
            } else {
                page("application/json", brave.to_string())
            }
        } else if path.starts_with("/denied?") {
            Answer::Page { status: 401, headers: vec![], body: b"{}".to_vec() }
        } else if path.starts_with("/down?") {
            Answer::Page { status: 503, headers: vec![], body: Vec::new() }
        } else if path.starts_with("/searx/search?") {
            page("application/json", json!({"results": [{"title": "S1", "url": "https://s1.example/", "content": "from searx"}]}).to_string())
        } else {
            page("text/plain", "?")
        }
    })
    .await;
    let with = |endpoint: &str, key: Option<&str>, searx: Option<String>| {
        kit(WebSettings::default().with_search(key.map(str::to_owned), server.url(endpoint), searx))
    };

    let brave = with("/brave", Some("k"), None)
        .call_ok("web_search", json!({"query": "klaw tools", "count": 2}))
        .await;
    assert_eq!(brave["provider"], "brave");
    assert_eq!(brave["results"].as_array().unwrap().len(), 2);
    assert_eq!(brave["results"][0]["title"], "Klaw tools");
    assert_eq!(
        brave["results"][0]["snippet"],
        "Write a tool as one async fn"
    );
    assert!(
        asked
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.contains("q=klaw+tools") && p.contains("count=2"))
    );

    let retried = with("/limited", Some("k"), None)
        .call_ok("web_search", json!({"query": "x"}))
        .await;
    assert_eq!(retried["results"].as_array().unwrap().len(), 3);
    assert_eq!(limited.load(Ordering::SeqCst), 2, "429 retried once");

    let denied = with("/denied", Some("bad"), None)
        .call_err("web_search", json!({"query": "x"}))
        .await;
    assert!(
        matches!(denied.kind(), ErrorKind::AccessDenied)
            && denied.message().contains("BRAVE_API_KEY"),
        "{denied:?}"
    );
    let down = with("/down", Some("k"), None)
        .call_err("web_search", json!({"query": "x"}))
        .await;
    assert!(
        matches!(down.kind(), ErrorKind::Unavailable) && down.message().contains("503"),
        "{down:?}"
    );

    let searx = with("/unused", None, Some(server.url("/searx")))
        .call_ok("web_search", json!({"query": "x"}))
        .await;
    assert_eq!(
        (
            searx["provider"].as_str(),
            searx["results"][0]["snippet"].as_str()
        ),
        (Some("searxng"), Some("from searx"))
    );

    let none = kit(WebSettings::default())
        .call_err("web_search", json!({"query": "x"}))
        .await;
    assert!(
        none.message().contains("BRAVE_API_KEY") && none.message().contains("searxngUrl"),
        "{}",
        none.message()
    );
    let empty = with("/brave", Some("k"), None)
        .call_err("web_search", json!({"query": "  "}))
        .await;
    assert!(matches!(empty.kind(), ErrorKind::InvalidArguments { .. }));
}

/// The JSON value of an answer, for messages.
#[allow(dead_code)]
fn shown(v: &Value) -> String {
    v.to_string()
}

/// `render_js` with the machine's browser, or `None` where there is none (never under
/// CI, whose setup installs one).
#[cfg(all(feature = "render", feature = "shell"))]
fn render_kit(settings: WebSettings) -> Option<Kit> {
    render_kit_with(settings, ShellSettings::default())
}

/// The sandbox helper of this crate's tests: it keeps `render_js`'s browser too.
#[cfg(all(feature = "render", feature = "shell"))]
const HELPER: &str = env!("CARGO_BIN_EXE_klaw-sandbox");

/// [`render_kit`] whose `exec` runs with `shell`.
#[cfg(all(feature = "render", feature = "shell"))]
fn render_kit_with(settings: WebSettings, shell: ShellSettings) -> Option<Kit> {
    let Some(browser) = klaw_tools::tools::web::find_browser(None) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no browser: scripts/setup.sh installs chromium-headless-shell"
        );
        eprintln!("no Chromium on PATH; render_js is not tested");
        return None;
    };
    Some(
        Kit::new()
            .unwrap()
            .with_context(|b| {
                b.service(settings)
                    .service(SandboxHelper::new(HELPER))
                    .service(shell)
            })
            .with_tool(klaw_tools::tools::web::render_js_tool(browser))
            .unwrap(),
    )
}

/// A page whose text only JavaScript writes: `render_js` returns it (`web_fetch` does
/// not), with a screenshot; the script's requests to loopback, the metadata address
/// and a name that resolves to loopback are stopped by the proxy (the trap counts none).
#[cfg(all(feature = "render", feature = "shell"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_js_runs_the_page_script_but_not_its_reach_into_the_host() {
    let _one = one_browser_at_a_time().await;
    let t4 = trap("127.0.0.1:0").await;
    let p = t4.addr.port();
    let server = Server::start(move |path| match path {
        "/app" => page(
            "text/html",
            format!(
                r#"<!doctype html><html><head><title>App</title></head><body><div id="app">Loading…</div>
<script>
document.getElementById("app").innerHTML = "<article><h1>Rendered by script</h1><p>" +
  "This paragraph was written by JavaScript after the page loaded, long enough to be " +
  "the article that readability keeps when it looks for the main content of the page. " +
  "It talks about rivers, valleys and the slow work of water on rock.</p></article>";
fetch("http://127.0.0.1:{p}/steal").catch(() => {{}});
fetch("http://evil.test:{p}/steal").catch(() => {{}});
new Image().src = "http://localhost:{p}/pixel.png";
new Image().src = "http://[::ffff:127.0.0.1]:{p}/pixel.png";
</script></body></html>"#
            ),
        ),
        _ => page("text/plain", "?"),
    })
    .await;
    let settings = WebSettings::default()
        .allow_private(server.addr.to_string())
        .resolve("evil.test", vec![ip("127.0.0.1")]);
    let Some(kit) = render_kit(settings) else {
        return;
    };
    let plain = kit
        .call_ok("web_fetch", json!({"url": server.url("/app")}))
        .await;
    assert!(
        !plain["content"]
            .as_str()
            .unwrap()
            .contains("written by JavaScript")
    );
    let out = kit
        .call(
            "render_js",
            json!({"url": server.url("/app"), "screenshot": true}),
        )
        .await
        .unwrap();
    let page = out.structured().unwrap();
    assert!(
        page["content"]
            .as_str()
            .unwrap()
            .contains("written by JavaScript"),
        "{page}"
    );
    assert!(matches!(
        out.attachments(),
        [klaw_tools::Attachment::Image { mime_type, data }] if mime_type == "image/png" && data.starts_with(b"\x89PNG")
    ));
    // The page's own requests had their time; none reached the trap.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(t4.hits(), 0, "a script's request reached the trap");
}

/// The hostile corpus through `render_js`: the same refusals, the traps never reached.
#[cfg(all(feature = "render", feature = "shell"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_js_refuses_the_hostile_corpus_too() {
    let _one = one_browser_at_a_time().await;
    let Hostile {
        t4,
        t6,
        allowed,
        settings,
        urls,
    } = hostile().await;
    // A redirect to another scheme leaves the browser waiting: keep that wait short.
    let settings = settings.with_limits(5 * 1024 * 1024, Duration::from_secs(5));
    let Some(kit) = render_kit(settings) else {
        return;
    };
    // The browser follows its own redirect limit (every hop still goes through the proxy).
    for url in urls.iter().filter(|u| !u.ends_with("/chain/6")) {
        let e = kit.call_err("render_js", json!({"url": url})).await;
        assert!(
            matches!(
                e.kind(),
                ErrorKind::AccessDenied | ErrorKind::Failed | ErrorKind::Timeout
            ),
            "{url}: {:?} {}",
            e.kind(),
            e.message()
        );
    }
    assert_eq!((t4.hits(), t6.hits()), (0, 0), "a request reached the trap");
    let ok = kit
        .call_ok("render_js", json!({"url": allowed.url("/chain/2")}))
        .await;
    assert!(
        ok["content"].as_str().unwrap().contains("end of chain"),
        "{ok}"
    );
}

/// One `render_js` test at a time: the tests find their browser among this process's
/// descendants (and kill it or its keeper), so no other test's browser may be there.
#[cfg(all(feature = "render", feature = "shell"))]
async fn one_browser_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ONE.lock().await
}

/// The browser processes of this test process: its descendants whose program is
/// Chromium (the keeper and a shell wrapper left out), with their command lines.
#[cfg(all(feature = "render", feature = "shell"))]
fn our_browsers() -> Vec<(i32, String)> {
    let me = i32::try_from(std::process::id()).unwrap();
    klaw_sandbox::tree::descendants(me)
        .into_iter()
        .filter_map(|pid| {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
            let name = exe.file_name()?.to_string_lossy().into_owned();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (name.contains("chrom") && !name.contains("crashpad"))
                .then(|| (pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        })
        .collect()
}

/// The inodes of the TCP sockets listening in `pid`'s network namespace.
#[cfg(all(feature = "render", feature = "shell"))]
fn listening_sockets(pid: i32) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && f[3] == "0A" {
                out.insert(f[9].to_owned());
            }
        }
    }
    out
}

/// The inodes of the sockets `pid` holds.
#[cfg(all(feature = "render", feature = "shell"))]
fn sockets_of(pid: i32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    l.strip_prefix("socket:[")
                        .and_then(|r| r.strip_suffix(']'))
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The line `Uid:` of `/proc/<pid>/status`: the real user id.
#[cfg(all(feature = "render", feature = "shell"))]
fn uid_of(pid: i32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A page worth rendering, with `script` run in it.
#[cfg(all(feature = "render", feature = "shell"))]
fn scripted(script: &str) -> Answer {
    page(
        "text/html",
        format!(
            r#"<!doctype html><html><head><title>Page</title></head><body><article><h1>A page</h1>
<p>This paragraph is long enough to be the article that readability keeps when it looks for
the main content of the page. It talks about rivers, valleys and the slow work of water.</p>
<p id="out">before</p></article><script>{script}</script></body></html>"#
        ),
    )
}

/// Issue 42, holes 3 and 4: the browser listens on no TCP port (DevTools goes over a
/// pipe), runs with Chromium's own sandbox (as its own unprivileged user when this is
/// root), and when its engine lets it go, no process of it and no profile stays.
#[cfg(all(feature = "render", feature = "shell"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_js_browser_has_no_port_runs_sandboxed_and_ends_with_its_engine() {
    let _one = one_browser_at_a_time().await;
    let server = Server::start(|_| scripted("")).await;
    let settings = WebSettings::default().allow_private(server.addr.to_string());
    let Some(kit) = render_kit(settings) else {
        return;
    };
    let ok = kit
        .call_ok("render_js", json!({"url": server.url("/")}))
        .await;
    assert!(ok["content"].as_str().unwrap().contains("rivers"), "{ok}");
    let browsers = our_browsers();
    let main: Vec<&(i32, String)> = browsers
        .iter()
        .filter(|(_, c)| c.contains("--user-data-dir=") && !c.contains("--type="))
        .collect();
    assert!(!main.is_empty(), "no browser found: {browsers:?}");
    for (pid, cmdline) in &browsers {
        let listening = listening_sockets(*pid);
        let held = sockets_of(*pid);
        assert!(
            !held.iter().any(|s| listening.contains(s)),
            "browser process {pid} listens on a TCP port: {cmdline}"
        );
        assert!(!cmdline.contains("--remote-debugging-port"), "{cmdline}");
    }
    let (pid, cmdline) = main[0];
    if rustix::process::geteuid().is_root() {
        assert_eq!(
            uid_of(*pid),
            Some(klaw_sandbox::unprivileged::BROWSER_ID),
            "the browser runs as root: {cmdline}"
        );
    }
    let userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .is_ok_and(|n| n.trim() != "0");
    if userns {
        assert!(
            !cmdline.contains("--no-sandbox"),
            "the browser runs without its sandbox: {cmdline}"
        );
        let ns = |p: i32| std::fs::read_link(format!("/proc/{p}/ns/user")).ok();
        assert!(
            browsers
                .iter()
                .any(|(p, c)| c.contains("--type=renderer") && ns(*p) != ns(*pid)),
            "no renderer in a sandbox of its own: {browsers:?}"
        );
    }
    let profile = cmdline
        .split(' ')
        .find_map(|a| a.strip_prefix("--user-data-dir="))
        .unwrap()
        .to_owned();
    assert!(std::path::Path::new(&profile).is_dir());
    drop(kit);
    let pids: Vec<i32> = browsers.iter().map(|(p, _)| *p).collect();
    let mut gone = false;
    for _ in 0..200 {
        let left: Vec<i32> = pids
            .iter()
            .copied()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&profile))
            })
            .collect();
        if left.is_empty() && !std::path::Path::new(&profile).exists() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        gone,
        "the browser or its profile {profile} outlived its engine: {:?}",
        our_browsers()
    );
}

/// Issue 42, hole 5: a popup the page opens (it beacons to a loopback server every
/// 100 ms) is closed when the call ends: no beacon arrives afterwards.
#[cfg(all(feature = "render", feature = "shell"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_js_closes_the_popups_of_a_page_when_the_call_ends() {
    let _one = one_browser_at_a_time().await;
    let beacons = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&beacons);
    let server = Server::start(move |path| {
        if path.starts_with("/beacon") {
            counted.fetch_add(1, Ordering::SeqCst);
            return page("text/plain", "ok");
        }
        match path {
            "/popup" => scripted(
                "fetch('/beacon?first'); setInterval(() => fetch('/beacon?' + Date.now()), 100);",
            ),
            _ => scripted(
                "window.open('/popup', '_blank'); setTimeout(() => window.open('/popup', 'second'), 10);",
            ),
        }
    })
    .await;
    let settings = WebSettings::default().allow_private(server.addr.to_string());
    let Some(kit) = render_kit(settings) else {
        return;
    };
    let ok = kit
        .call_ok("render_js", json!({"url": server.url("/")}))
        .await;
    assert!(ok["content"].as_str().unwrap().contains("rivers"), "{ok}");
    // What was on its way when the call ended arrives.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = beacons.load(Ordering::SeqCst);
    assert!(after > 0, "the popup never ran, so the test proves nothing");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = beacons.load(Ordering::SeqCst);
    assert_eq!(
        later, after,
        "a popup kept running after the call: {after} beacons by its end, {later} three seconds later"
    );
    drop(kit);
}

/// Issue 42, hole 5: `alert`, `confirm`, `prompt` and `beforeunload` are dismissed as
/// they open (the script goes on after each), not waited on until the time limit.
#[cfg(all(feature = "render", feature = "shell"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_js_dismisses_dialogs_at_once() {
    let _one = one_browser_at_a_time().await;
    let server = Server::start(|path| match path {
        "/alert" => scripted("alert('hi'); document.getElementById('out').textContent = 'alert dismissed';"),
        "/confirm" => scripted("const c = confirm('sure?'); document.getElementById('out').textContent = 'confirm said ' + c;"),
        "/prompt" => scripted("const p = prompt('name?', 'x'); document.getElementById('out').textContent = 'prompt said ' + p;"),
        "/beforeunload" => scripted(
            "window.addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = 'stay'; return 'stay'; }); \
             document.body.click(); document.getElementById('out').textContent = 'beforeunload set';",
        ),
        // The dialogs come back in a loop, after load too.
        "/again" => scripted("document.getElementById('out').textContent = 'loop done'; setInterval(() => alert('again'), 50);"),
        _ => page("text/plain", "?"),
    })
    .await;
    let settings = WebSettings::default()
        .allow_private(server.addr.to_string())
        .with_limits(5 * 1024 * 1024, Duration::from_secs(60));
    let Some(kit) = render_kit(settings) else {
        return;
    };
    for (path, said) in [
        ("/alert", "alert dismissed"),
        ("/confirm", "confirm said false"),
        ("/prompt", "prompt said null"),
        ("/beforeunload", "beforeunload set"),
        ("/again", "loop done"),
    ] {
        let started = std::time::Instant::now();
        let ok = tokio::time::timeout(
            Duration::from_secs(30),
            kit.call_ok(
                "render_js",
                json!({"url": server.url(path), "format": "text"}),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("{path}: the dialog was waited on"));
        assert!(
            ok["content"].as_str().unwrap().contains(said),
            "{path}: {ok}"
        );
        // Far below the 60 s time limit (no exact time asserted).
        assert!(started.elapsed() < Duration::from_secs(30), "{path}");
    }
    drop(kit);
}

/// A page that makes its document huge (a 100 MB comment written by its script, over the
/// 64 MiB a DevTools message may have) is read
/// cut to `web.maxBytes` in the page: the call succeeds with the start of the text, and
/// the engine never holds the whole document (the DevTools answer stays small).
#[cfg(feature = "render")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_js_reads_a_huge_document_cut_to_max_bytes() {
    let _one = one_browser_at_a_time().await;
    let server = Server::start(|path| match path {
        "/huge" => scripted(
            "document.getElementById('out').textContent = 'start of the text'; \
             document.body.appendChild(document.createComment('x'.repeat(100 * 1024 * 1024)));",
        ),
        _ => page("text/plain", "?"),
    })
    .await;
    let settings = WebSettings::default()
        .allow_private(server.addr.to_string())
        .with_limits(256 * 1024, Duration::from_secs(120));
    let Some(kit) = render_kit(settings) else {
        return;
    };
    let ok = kit
        .call_ok(
            "render_js",
            json!({"url": server.url("/huge"), "format": "text", "maxChars": 1000}),
        )
        .await;
    let content = ok["content"].as_str().unwrap();
    assert!(content.contains("start of the text"), "{ok}");
    drop(kit);
}

/// Issue 42 (side note): a `file:` iframe, which the proxy never sees, neither stalls the
/// call nor fails it: the page is rendered without the file.
#[cfg(all(feature = "render", feature = "shell"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_js_renders_a_page_with_a_file_iframe_without_the_file() {
    let _one = one_browser_at_a_time().await;
    let server = Server::start(|_| {
        scripted(
            "const f = document.createElement('iframe'); f.src = 'file:///etc/passwd'; document.body.appendChild(f); \
             const g = document.createElement('iframe'); g.src = 'ftp://127.0.0.1:1/x'; document.body.appendChild(g);",
        )
    })
    .await;
    let settings = WebSettings::default()
        .allow_private(server.addr.to_string())
        .with_limits(5 * 1024 * 1024, Duration::from_secs(60));
    let Some(kit) = render_kit(settings) else {
        return;
    };
    let ok = tokio::time::timeout(
        Duration::from_secs(30),
        kit.call_ok(
            "render_js",
            json!({"url": server.url("/"), "format": "html"}),
        ),
    )
    .await
    .expect("a file: iframe stalled render_js");
    let content = ok["content"].as_str().unwrap();
    assert!(content.contains("rivers"), "{ok}");
    assert!(!content.contains("root:x:0:0"), "{ok}");
    drop(kit);
}

/// Issue 42, hole 4: a sandboxed command with the network allowed looks for a DevTools
/// port as the red team did (every TCP port listening on loopback in `/proc/net/tcp{,6}`)
/// while `render_js`'s browser runs: none it finds is the browser's. (It does not
/// connect to them: other tests' traps listen there too; with the previous code the
/// browser's port was among them, and a `GET /json/version` there drove the browser.)
#[cfg(all(feature = "render", feature = "shell"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_finds_no_devtools_port_of_the_browser() {
    let _one = one_browser_at_a_time().await;
    let server = Server::start(|_| scripted("")).await;
    let mut ran = 0;
    for mode in [SandboxMode::Bwrap, SandboxMode::Landlock] {
        if let Err(why) = klaw_sandbox::describe(mode, Some(std::path::Path::new(HELPER))) {
            assert!(
                std::env::var("CI").is_err(),
                "sandbox {mode:?} does not work on this CI machine: {why}"
            );
            eprintln!("skipping {mode:?}: {why}");
            continue;
        }
        let settings = WebSettings::default().allow_private(server.addr.to_string());
        let shell = ShellSettings::default()
            .with_sandbox(mode)
            .with_network(true);
        let Some(kit) = render_kit_with(settings, shell) else {
            return;
        };
        kit.call_ok("render_js", json!({"url": server.url("/")}))
            .await;
        let script = r#"
for f in /proc/net/tcp /proc/net/tcp6; do
  while read -r sl local rem st rest; do
    [ "$st" = 0A ] || continue
    case "$local" in 0100007F:*|00000000:*|00000000000000000000000001000000:*|00000000000000000000000000000000:*) ;; *) continue ;; esac
    echo "listening $((16#${local##*:}))"
  done < "$f"
done
echo scanned
"#;
        let out = kit
            .call_ok(
                "exec",
                json!({"command": ["bash", "-c", script], "timeout": 100}),
            )
            .await;
        let text = out.to_string();
        assert!(text.contains("scanned"), "{mode:?}: {text}");
        let found: Vec<u16> = text
            .split("listening ")
            .skip(1)
            .filter_map(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .collect();
        // The command sees the host's loopback (this test's own page server among it).
        assert!(found.contains(&server.addr.port()), "{mode:?}: {text}");
        let browsers = our_browsers();
        assert!(!browsers.is_empty(), "{mode:?}: no browser running");
        let ours: std::collections::HashSet<String> =
            browsers.iter().flat_map(|(p, _)| sockets_of(*p)).collect();
        for port in found {
            let owner: Vec<String> = ["tcp", "tcp6"]
                .iter()
                .flat_map(|t| {
                    std::fs::read_to_string(format!("/proc/net/{t}"))
                        .unwrap_or_default()
                        .lines()
                        .skip(1)
                        .filter_map(|l| {
                            let f: Vec<&str> = l.split_whitespace().collect();
                            let p = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
                            (p == port && f.get(3) == Some(&"0A")).then(|| f[9].to_owned())
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            assert!(
                !owner.iter().any(|i| ours.contains(i)),
                "{mode:?}: the command found the browser's port {port}: {text}"
            );
        }
        ran += 1;
        drop(kit);
    }
    assert!(ran > 0 || std::env::var("CI").is_err(), "no sandbox ran");
}

/// A browser that died (killed here) is started again at the next call, and the dead
/// one's profile is gone: its keeper cleaned up when it exited.
#[cfg(all(feature = "render", feature = "shell"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_js_starts_a_new_browser_when_the_last_one_died() {
    let _one = one_browser_at_a_time().await;
    let server = Server::start(|_| scripted("")).await;
    let settings = WebSettings::default().allow_private(server.addr.to_string());
    let Some(kit) = render_kit(settings) else {
        return;
    };
    let main = |browsers: &[(i32, String)]| {
        browsers
            .iter()
            .find(|(_, c)| c.contains("--user-data-dir=") && !c.contains("--type="))
            .map(|(p, c)| {
                let profile = c
                    .split(' ')
                    .find_map(|a| a.strip_prefix("--user-data-dir="))
                    .unwrap()
                    .to_owned();
                (*p, profile)
            })
    };
    kit.call_ok("render_js", json!({"url": server.url("/")}))
        .await;
    let (pid, profile) = main(&our_browsers()).expect("no browser");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let mut cleaned = false;
    for _ in 0..200 {
        if !std::path::Path::new(&profile).exists() {
            cleaned = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cleaned, "the dead browser's profile {profile} stayed");
    let ok = kit
        .call_ok("render_js", json!({"url": server.url("/")}))
        .await;
    assert!(ok["content"].as_str().unwrap().contains("rivers"), "{ok}");
    let (again, other) = main(&our_browsers()).expect("no new browser");
    assert!(again != pid && other != profile);
    drop(kit);
}

/// The browser goes even when its keeper is killed: the engine closes the DevTools pipe
/// and Chromium leaves at its end (a shell wrapper in between changes nothing).
#[cfg(all(feature = "render", feature = "shell"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_js_browser_goes_when_its_keeper_is_killed() {
    let _one = one_browser_at_a_time().await;
    let server = Server::start(|_| scripted("")).await;
    let settings = WebSettings::default().allow_private(server.addr.to_string());
    let Some(kit) = render_kit(settings) else {
        return;
    };
    kit.call_ok("render_js", json!({"url": server.url("/")}))
        .await;
    let me = i32::try_from(std::process::id()).unwrap();
    let browsers = our_browsers();
    let profile = browsers
        .iter()
        .find_map(|(_, c)| {
            c.split(' ')
                .find_map(|a| a.strip_prefix("--user-data-dir="))
        })
        .expect("no browser")
        .to_owned();
    // The keeper of this browser: our child whose command line names the profile.
    let keeper = klaw_sandbox::tree::descendants(me)
        .into_iter()
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c);
                c.contains("__klaw-browser") && c.contains(&profile)
            })
        })
        .expect("no keeper");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(keeper).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let mut gone = false;
    for _ in 0..200 {
        let left = browsers.iter().any(|(p, _)| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&profile))
        });
        if !left {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nobody is left to remove the profile in this case.
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        gone,
        "the browser outlived its killed keeper: {:?}",
        our_browsers()
    );
    drop(kit);
}

/// `levels` elements opened by `open` (closed by `close` when given: `None` leaves them
/// open) around `inner`.
fn nested(open: &str, close: Option<&str>, levels: usize, inner: &str) -> String {
    let mut page = String::from("<!doctype html><html><head><title>Deep</title></head><body>");
    page.push_str(&open.repeat(levels));
    page.push_str(inner);
    if let Some(close) = close {
        page.push_str(&close.repeat(levels));
    }
    page.push_str("</body></html>");
    page
}

/// A page of `shape` nested `levels` deep, its text `DEEP-TEXT-<shape>` at the bottom.
fn deep_page(shape: &str, levels: usize) -> String {
    let text = format!("<p>DEEP-TEXT-{shape} at the bottom of the page.</p>");
    let (open, close) = match shape {
        "inline" => ("<b>", Some("</b>")),
        "inline-unclosed" => ("<b>", None),
        "inline-mixed" => ("<span><i><a href=\"/x\"><em>", Some("</em></a></i></span>")),
        "block" => ("<div>", Some("</div>")),
        "block-unclosed" => ("<div>", None),
        "self-closing" => ("<div/>", None),
        "misnested" => ("<b><div>", Some("</b></div>")),
        "mixed" => (
            "<div class=\"a\"><section><span><strong><blockquote>",
            Some("</blockquote></strong></span></section></div>"),
        ),
        "table" => ("<table><tr><td>", Some("</td></tr></table>")),
        "table-unclosed" => ("<table><tr><td>", None),
        "list" => ("<ul><li>", Some("</li></ul>")),
        "list-unclosed" => ("<ol><li>", None),
        "svg" => ("<svg><g><link>", None),
        // Formatting elements a paragraph closes and the next one re-opens, each new.
        "reopened" => {
            let mut page = String::from("<html><body>");
            for i in 0..levels {
                page.push_str(&format!("<p><b class=\"k{i}\">x</p>"));
            }
            page.push_str(&text);
            return page;
        }
        _ => unreachable!("{shape}"),
    };
    let inner = if shape == "svg" {
        format!("</svg>{text}")
    } else {
        text
    };
    nested(open, close, levels, &inner)
}

const DEEP_SHAPES: [&str; 14] = [
    "inline",
    "inline-unclosed",
    "inline-mixed",
    "block",
    "block-unclosed",
    "self-closing",
    "misnested",
    "mixed",
    "table",
    "table-unclosed",
    "list",
    "list-unclosed",
    "svg",
    "reopened",
];

/// A page nested thousands of levels deep (3,000 `<b>` overflowed a thread's stack and
/// aborted the process; 30,000 `<div>` took minutes) is read, in every shape and format,
/// and its text comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_pages_are_read_in_every_shape() {
    let server = Server::start(|path| {
        let mut parts = path.trim_start_matches('/').split('/');
        match (parts.next(), parts.next().and_then(|l| l.parse().ok())) {
            (Some(shape), Some(levels)) => {
                page("text/html; charset=utf-8", deep_page(shape, levels))
            }
            _ => page("text/plain", "?"),
        }
    })
    .await;
    let kit = kit(WebSettings::default()
        .allow_private(server.addr.to_string())
        .with_limits(16 * 1024 * 1024, Duration::from_secs(60)));
    let mut failed = Vec::new();
    for levels in [3_000, 30_000, 100_000] {
        for shape in DEEP_SHAPES {
            // A table or list past the bound is one table or list of as many rows or
            // items: as slow as a flat one of that many, too slow for a debug build.
            if levels > 30_000
                && (shape.starts_with("table") || shape.contains("mixed") || shape == "list")
            {
                continue;
            }
            let formats: &[&str] = if levels == 3_000 {
                &["markdown", "text", "html"]
            } else {
                &["markdown"]
            };
            for format in formats {
                let started = std::time::Instant::now();
                let out = kit
                    .call(
                        "web_fetch",
                        json!({"url": server.url(&format!("/{shape}/{levels}")), "format": format, "maxChars": 1_000_000}),
                    )
                    .await;
                let out = match out {
                    Ok(out) => out.structured().unwrap().clone(),
                    Err(e) => panic!("{shape} x {levels} as {format}: {e:?}"),
                };
                let content = out["content"].as_str().unwrap();
                eprintln!(
                    "{shape} x {levels} as {format}: {:?}, {} chars",
                    started.elapsed(),
                    content.len()
                );
                // Past the bounds a deep list is one list of thousands of (empty) items,
                // longer than an answer holds: then the answer is full, if not the bottom.
                let full = out["truncated"] == true && out["length"] == 1_000_000;
                let read = content.contains(&format!("DEEP-TEXT-{shape}"))
                    || (full && shape.starts_with("list"));
                if !read {
                    failed.push(format!(
                        "{shape} x {levels} as {format}: {}",
                        &content[..content.len().min(600)]
                    ));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The CPU time this process has used (all its threads), from `/proc/self/stat`.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // After the command's name in parentheses: utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// Run alone by `the_time_limit_stops_the_extraction` (in a process of its own, so that
/// no other test's work counts in its CPU time): a 19 MB page of nested elements with a
/// two-second `web.timeoutSeconds`; prints the error's kind, how long the call took and
/// how much CPU the process used in the two seconds after it returned.
#[ignore = "run by the_time_limit_stops_the_extraction"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_extraction_past_the_time_limit() {
    let body = nested("<b>", Some("</b>"), 2_700_000, "<p>too deep to finish</p>");
    let server = Server::start(move |_| page("text/html", body.clone())).await;
    let kit = kit(WebSettings::default()
        .allow_private(server.addr.to_string())
        .with_limits(64 * 1024 * 1024, Duration::from_secs(2)));
    let started = std::time::Instant::now();
    let e = kit
        .call_err("web_fetch", json!({"url": server.url("/")}))
        .await;
    let took = started.elapsed().as_secs_f64();
    let before = cpu_seconds();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = cpu_seconds();
    println!(
        "PROBE kind={:?} took={took:.2} cpu_after={:.2} message={}",
        e.kind(),
        after - before,
        e.message()
    );
}

/// web.timeoutSeconds bounds the extraction too, and really stops it: the call returns
/// a timeout soon after the limit and no thread goes on burning CPU on the page (before,
/// the blocking thread ran on, unstoppable, after the call had given up).
/// The test `name` of this file by its full path in the test binary: `web::{name}`
/// (this file is a module of `tests/all.rs`), as `--exact` wants it.
fn test_path(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

#[test]
fn the_time_limit_stops_the_extraction() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            &test_path("probe_extraction_past_the_time_limit"),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.find("PROBE ").map(|at| &l[at..]))
        .unwrap_or_else(|| {
            panic!(
                "the probe printed nothing ({:?}): {stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let field = |name: &str| -> String {
        line.split(' ')
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .unwrap()
            .to_owned()
    };
    assert_eq!(field("kind"), "Timeout", "{line}");
    assert!(
        line.contains("web.timeoutSeconds") && line.contains("extraction was stopped"),
        "{line}"
    );
    // Generous bounds: the limit is 2 s; the whole page takes far longer than this.
    let took: f64 = field("took").parse().unwrap();
    assert!(took < 15.0, "{line}");
    // Two seconds of one busy thread would be 2 s of CPU.
    let cpu: f64 = field("cpu_after").parse().unwrap();
    assert!(
        cpu < 0.7,
        "a thread kept working after the call returned: {line}"
    );
}

// ---- http_request: any common method, headers and a body, behind web_fetch's guard ----

/// A loopback server that answers `/echo` with what it received (method, path, headers,
/// body) as JSON, `/text` with plain text, `/huge` with 3 MB of text, `/private` with a
/// redirect to `trap`, `/again` with a 307 to `/echo`, `/bin` with binary data.
async fn echo_server(trap: SocketAddr) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                let end = loop {
                    if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&data[..end]).into_owned();
                let mut lines = head.split("\r\n");
                let first: Vec<String> = lines
                    .next()
                    .unwrap()
                    .split(' ')
                    .map(str::to_owned)
                    .collect();
                let mut headers = serde_json::Map::new();
                let mut length = 0;
                for line in lines.filter(|l| !l.is_empty()) {
                    let (k, v) = line.split_once(':').unwrap();
                    let k = k.trim().to_ascii_lowercase();
                    if k == "content-length" {
                        length = v.trim().parse().unwrap();
                    }
                    headers.insert(k, json!(v.trim()));
                }
                let mut body = data[end..].to_vec();
                while body.len() < length {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => body.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = match first[1].as_str() {
                    "/echo" => page(
                        "application/json; charset=utf-8",
                        json!({
                            "method": first[0],
                            "headers": headers,
                            "body": String::from_utf8_lossy(&body),
                        })
                        .to_string(),
                    ),
                    "/text" => Answer::Page {
                        status: 201,
                        headers: vec![
                            ("Content-Type", "text/plain".into()),
                            ("X-Reply", "one".into()),
                            ("X-Reply", "two".into()),
                        ],
                        body: b"plain words".to_vec(),
                    },
                    "/huge" => Answer::Huge(3 * 1024 * 1024),
                    "/private" => redirect(302, &format!("http://{trap}/")),
                    "/again" => redirect(307, "/echo"),
                    "/bin" => page("application/octet-stream", vec![0u8, 1, 2, 3]),
                    _ => page("text/plain", "?"),
                };
                let _ = respond(&mut stream, answer).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_request_sends_every_method_with_headers_and_body() {
    let trap = trap("127.0.0.1:0").await;
    let addr = echo_server(trap.addr).await;
    let kit = kit(WebSettings::default()
        .allow_private(addr.to_string())
        .with_limits(1024 * 1024, Duration::from_secs(5)));
    let url = format!("http://{addr}/echo");
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "post"] {
        let r = kit
            .call_ok(
                "http_request",
                json!({
                    "method": method,
                    "url": url,
                    "headers": {"X-Token": "$HOME secret", "Authorization": "Bearer abc"},
                    "body": format!("payload of {method}"),
                }),
            )
            .await;
        assert_eq!(r["status"], 200, "{r}");
        // A JSON answer is structured content.
        let seen = &r["body"];
        assert_eq!(seen["method"], method.to_ascii_uppercase(), "{r}");
        assert_eq!(seen["body"], format!("payload of {method}"), "{r}");
        // Sent as given: nothing is expanded from the engine's environment.
        assert_eq!(seen["headers"]["x-token"], "$HOME secret", "{r}");
        assert_eq!(seen["headers"]["authorization"], "Bearer abc", "{r}");
        assert!(
            r["headers"]["content-type"]
                .as_str()
                .unwrap()
                .starts_with("application/json"),
            "{r}"
        );
    }
    // A JSON body is sent as JSON.
    let r = kit
        .call_ok(
            "http_request",
            json!({"method": "POST", "url": url, "body": {"a": [1, 2]}}),
        )
        .await;
    assert_eq!(r["body"]["headers"]["content-type"], "application/json");
    assert_eq!(r["body"]["body"], r#"{"a":[1,2]}"#);
    // HEAD: the status and headers, no body.
    let r = kit
        .call_ok("http_request", json!({"method": "HEAD", "url": url}))
        .await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["body"], Value::Null, "{r}");
    // Text stays text; repeated headers are joined.
    let r = kit
        .call_ok(
            "http_request",
            json!({"method": "GET", "url": format!("http://{addr}/text")}),
        )
        .await;
    assert_eq!(r["status"], 201, "{r}");
    assert_eq!(r["body"], "plain words", "{r}");
    assert_eq!(r["headers"]["x-reply"], "one, two", "{r}");
    // A 307 keeps the method and the body.
    let r = kit
        .call_ok(
            "http_request",
            json!({"method": "PUT", "url": format!("http://{addr}/again"), "body": "kept"}),
        )
        .await;
    assert_eq!(r["url"], url, "{r}");
    assert_eq!(r["body"]["method"], "PUT", "{r}");
    assert_eq!(r["body"]["body"], "kept", "{r}");
    // Binary bodies are not returned.
    let r = kit
        .call_ok(
            "http_request",
            json!({"method": "GET", "url": format!("http://{addr}/bin")}),
        )
        .await;
    assert_eq!(r["body"], Value::Null, "{r}");
    assert_eq!(r["bytes"], 4, "{r}");
    assert_eq!(trap.hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_request_is_guarded_capped_and_checked() {
    let trap = trap("127.0.0.1:0").await;
    let addr = echo_server(trap.addr).await;
    let kit = kit(WebSettings::default()
        .allow_private(addr.to_string())
        .with_limits(1024 * 1024, Duration::from_secs(5)));
    // A redirect to a private address is refused, the trap never reached.
    let e = kit
        .call_err(
            "http_request",
            json!({"method": "POST", "url": format!("http://{addr}/private"), "body": "x"}),
        )
        .await;
    assert!(matches!(e.kind(), ErrorKind::AccessDenied), "{e:?}");
    assert_eq!(trap.hits(), 0);
    // A body over the cap is cut: web.maxBytes, or less when asked.
    let r = kit
        .call_ok(
            "http_request",
            json!({"method": "GET", "url": format!("http://{addr}/huge")}),
        )
        .await;
    assert_eq!(r["truncated"], true);
    assert_eq!(r["bytes"], 1024 * 1024);
    let r = kit
        .call_ok(
            "http_request",
            json!({"method": "GET", "url": format!("http://{addr}/huge"), "maxBytes": 10_000_000}),
        )
        .await;
    assert_eq!(
        r["bytes"],
        1024 * 1024,
        "maxBytes stays within web.maxBytes"
    );
    let r = kit
        .call_ok(
            "http_request",
            json!({"method": "GET", "url": format!("http://{addr}/huge"), "maxBytes": 100}),
        )
        .await;
    assert_eq!(r["body"].as_str().unwrap().len(), 100);
    // A slow server meets the call's own time limit (at most web.timeoutSeconds).
    let slow = Server::start(|_| Answer::Drip).await;
    let slow_kit = self::kit(
        WebSettings::default()
            .allow_private(slow.addr.to_string())
            .with_limits(1024 * 1024, Duration::from_secs(5)),
    );
    let started = std::time::Instant::now();
    let e = slow_kit
        .call_err(
            "http_request",
            json!({"method": "GET", "url": slow.url("/"), "timeout": 1}),
        )
        .await;
    assert!(matches!(e.kind(), ErrorKind::Timeout), "{e:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // Bad methods, URLs and headers are clear errors.
    for (args, pointer) in [
        (
            json!({"method": "TRACE", "url": format!("http://{addr}/echo")}),
            "/method",
        ),
        (json!({"method": "GET", "url": "not a url"}), "/url"),
        (
            json!({"method": "GET", "url": format!("http://{addr}/echo"), "headers": {"Host": "x"}}),
            "/headers/Host",
        ),
    ] {
        let e = kit.call_err("http_request", args.clone()).await;
        assert!(e.is_invalid_arguments(), "{args}: {e:?}");
        assert!(format!("{e:?}").contains(pointer), "{args}: {e:?}");
    }
    // The hostile corpus, with a method that writes.
    let Hostile {
        t4,
        t6,
        settings,
        urls,
        ..
    } = hostile().await;
    let kit = self::kit(settings);
    for url in &urls {
        let e = kit
            .call_err("http_request", json!({"method": "DELETE", "url": url}))
            .await;
        assert!(
            matches!(e.kind(), ErrorKind::AccessDenied | ErrorKind::Failed),
            "{url}: {:?} {}",
            e.kind(),
            e.message()
        );
    }
    assert_eq!((t4.hits(), t6.hits()), (0, 0), "a request reached the trap");
}
