//! `web_fetch` of a 1 MB page from a loopback server: as an HTML article (transfer,
//! decoding and readability extraction to markdown) and as plain text of the same size
//! (transfer and decoding only). The difference is the time extraction takes. And
//! `render_js` of a small page whose text a script writes: cold (the browser started
//! for the call) and warm (the browser reused), when a Chromium is on `PATH`. And
//! `web_fetch` of pages of one size and one amount of text in different shapes: flat
//! (sibling blocks; the rows of one table), nested inline elements, nested blocks, nested tables and nested
//! lists, tens of thousands of levels deep: extraction takes time linear in the page's
//! size whatever its shape, so the nested ones stay within a small factor of the flat one.
//!
//! Run with: cargo bench -p klaw-tools --features render,shell,testing --bench web

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a panic is a failed run

use std::io::{Read, Write};

use criterion::{Criterion, criterion_group, criterion_main};
use klaw_tools::testing::Kit;
use klaw_tools::tools::shell::SandboxHelper;
use klaw_tools::tools::web::WebSettings;

/// The sandbox helper of this crate, which keeps `render_js`'s browser.
const HELPER: &str = env!("CARGO_BIN_EXE_klaw-sandbox");
use serde_json::json;

/// An article of about `bytes` bytes: paragraphs, headings, a menu, ads and comments.
fn article(bytes: usize) -> String {
    let mut page = String::from(
        "<!doctype html><html><head><title>Bench article</title><script>var x = 1;</script></head><body>\
         <nav><a href=\"/\">Home</a> <a href=\"/a\">A</a></nav><div class=\"ad\">Buy now</div><article><h1>Bench</h1>",
    );
    let mut n = 0;
    while page.len() < bytes {
        n += 1;
        if n % 10 == 0 {
            page.push_str(&format!("<h2>Section {n}</h2>"));
        }
        page.push_str(&format!(
            "<p>Paragraph {n}: rivers cut into rock over thousands of years, carrying sand and \
             pebbles that grind the riverbed, and the valley deepens a little every flood season. \
             <a href=\"/ref/{n}\">reference</a>.</p>"
        ));
    }
    page.push_str("</article><section class=\"comments\">first!</section><footer>footer</footer></body></html>");
    page
}

/// Serves `body` as `content_type` to every request; returns the address.
fn serve(content_type: &'static str, body: String) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().map_while(Result::ok) {
            let body = body.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(body.as_bytes());
            });
        }
    });
    addr
}

fn fetch_1mb(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let page = article(1_000_000);
    let html = serve("text/html; charset=utf-8", page.clone());
    let text = serve("text/plain; charset=utf-8", page);
    let kit = Kit::new().unwrap().with_context(|b| {
        b.service(
            WebSettings::default()
                .allow_private(html.to_string())
                .allow_private(text.to_string()),
        )
    });
    let mut g = c.benchmark_group("web_fetch_1mb");
    g.sample_size(20);
    for (name, addr) in [
        ("html_article_to_markdown", html),
        ("plain_text_transfer_only", text),
    ] {
        let args = json!({"url": format!("http://{addr}/"), "maxChars": 1_000_000});
        g.bench_function(name, |b| {
            b.iter(|| {
                let out = rt.block_on(kit.call("web_fetch", args.clone())).unwrap();
                let page = out.structured().unwrap();
                assert_eq!(page["status"], 200);
                // The whole article came through, not a fallback fragment.
                assert!(
                    page["length"].as_u64().unwrap() > 500_000,
                    "{}",
                    page["length"]
                );
            });
        });
    }
    g.finish();
}

/// A page of about `bytes` bytes, `word`s of text in the shape named.
fn shaped(shape: &str, bytes: usize) -> String {
    let (open, close) = match shape {
        "flat" => ("<div>word ", "</div>"),
        "flat_table" => ("<tr><td>word ", "</td></tr>"),
        "nested_inline" => ("<b>word ", "</b>"),
        "nested_blocks" => ("<div>word ", "</div>"),
        "nested_tables" => ("<table><tr><td>word ", "</td></tr></table>"),
        "nested_lists" => ("<ul><li>word ", "</li></ul>"),
        _ => unreachable!("{shape}"),
    };
    let levels = bytes / (open.len() + close.len());
    let body = if shape == "flat" {
        format!("{open}{close}").repeat(levels)
    } else if shape == "flat_table" {
        format!("<table>{}</table>", format!("{open}{close}").repeat(levels))
    } else {
        open.repeat(levels) + &close.repeat(levels)
    };
    format!("<!doctype html><html><head><title>Shape</title></head><body>{body}</body></html>")
}

fn nested_vs_flat(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let shapes = [
        "flat",
        "flat_table",
        "nested_inline",
        "nested_blocks",
        "nested_tables",
        "nested_lists",
    ];
    let mut settings = WebSettings::default();
    let mut served = Vec::new();
    for shape in shapes {
        let addr = serve("text/html; charset=utf-8", shaped(shape, 256 * 1024));
        settings = settings.allow_private(addr.to_string());
        served.push((shape, addr));
    }
    let kit = Kit::new().unwrap().with_context(|b| b.service(settings));
    let mut g = c.benchmark_group("web_fetch_256kb_shapes");
    g.sample_size(10);
    for (shape, addr) in served {
        let args = json!({"url": format!("http://{addr}/"), "maxChars": 1_000_000});
        g.bench_function(shape, |b| {
            b.iter(|| {
                let out = rt.block_on(kit.call("web_fetch", args.clone())).unwrap();
                let page = out.structured().unwrap();
                assert!(
                    page["content"].as_str().unwrap().contains("word"),
                    "{shape}"
                );
            });
        });
    }
    g.finish();
}

fn render(c: &mut Criterion) {
    let Some(browser) = klaw_tools::tools::web::find_browser(None) else {
        eprintln!("skipping render_js: no Chromium on PATH");
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let page = "<!doctype html><html><body><div id=\"app\"></div><script>\
        document.getElementById('app').innerHTML = '<article><h1>Hi</h1><p>' + \
        'Written by a script, long enough to be the article of the page. '.repeat(8) + '</p></article>';\
        </script></body></html>";
    let addr = serve("text/html", page.to_owned());
    let kit = || {
        Kit::new()
            .unwrap()
            .with_context(|b| {
                b.service(WebSettings::default().allow_private(addr.to_string()))
                    .service(SandboxHelper::new(HELPER))
            })
            .with_tool(klaw_tools::tools::web::render_js_tool(browser.clone()))
            .unwrap()
    };
    let args = json!({"url": format!("http://{addr}/")});
    let mut g = c.benchmark_group("render_js");
    g.sample_size(10);
    g.bench_function("cold_browser_started", |b| {
        b.iter_batched(
            kit,
            |k| {
                rt.block_on(k.call("render_js", args.clone())).unwrap();
                k
            },
            criterion::BatchSize::PerIteration,
        );
    });
    let warm = kit();
    rt.block_on(warm.call("render_js", args.clone())).unwrap();
    g.bench_function("warm_browser_reused", |b| {
        b.iter(|| rt.block_on(warm.call("render_js", args.clone())).unwrap());
    });
    g.finish();
}

criterion_group!(benches, fetch_1mb, nested_vs_flat, render);
criterion_main!(benches);
