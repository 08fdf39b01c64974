//! `render_js` without a local browser: with `CLOUDFLARE_API_TOKEN` and
//! `CLOUDFLARE_ACCOUNT_ID` set, `klaw-engine call render_js` renders through Cloudflare's
//! Browser Rendering REST API, here a fake of it on loopback
//! (`web.cloudflareBaseUrl`) speaking its documented shape: `POST
//! /accounts/{account}/browser-rendering/content` with `{"url": ...}` and the token as a
//! bearer header, answered `{"success": true, "result": "<html>"}`. The page goes
//! through `render_js`'s extraction and caps; a refused token (401), the rate limit
//! (429) and `success: false` are clear errors; the token is in no output and no log
//! line. With a browser configured, the local one is used and Cloudflare is not asked.

use serde_json::{Value, json};

use crate::common;
use common::scripted::{Reply, ScriptedServer};
use common::{stderr, stdout};

const TOKEN: &str = "cf-token-SECRET-4711";

/// A page of the kind readability keeps, for `url`'s path.
fn article(title: &str) -> String {
    format!(
        "<!doctype html><html><head><title>{title}</title></head><body><nav>menu</nav>\
         <article><h1>Rendered remotely</h1><p>This paragraph came back from the remote \
         browser after its JavaScript ran, long enough to be the article that readability \
         keeps when it looks for the main content of the page: rivers, valleys and the slow \
         work of water on rock.</p></article></body></html>"
    )
}

fn fake_cloudflare() -> ScriptedServer {
    ScriptedServer::respond(|r| {
        let url = r.body["url"].as_str().unwrap_or_default();
        let error = |status: u16, code: i64, message: &str| {
            Reply::status(
                status,
                &json!({"success": false, "errors": [{"code": code, "message": message}], "messages": [], "result": null})
                    .to_string(),
            )
        };
        if url.ends_with("/denied") {
            return error(401, 10000, "Authentication error");
        }
        if url.ends_with("/busy") {
            return error(
                429,
                971,
                "Please wait and consider throttling your request speed",
            )
            .with_header("retry-after", "7");
        }
        if url.ends_with("/broken") {
            return Reply::json(
                json!({"success": false, "errors": [{"code": 2001, "message": "Navigation timeout of 30000 ms exceeded"}], "messages": []}),
            );
        }
        Reply::json(
            json!({"success": true, "errors": [], "messages": [], "result": article("Remote page")}),
        )
    })
}

#[test]
fn render_js_renders_through_cloudflare_without_a_local_browser() {
    let server = fake_cloudflare();
    let home = tempfile::tempdir().unwrap();
    let call = |args: Value, browser: &str| {
        let mut c = common::engine_in(home.path(), &["call", "render_js", &args.to_string()]);
        c.env("KLAW_BROWSER", browser)
            .env("CLOUDFLARE_API_TOKEN", TOKEN)
            .env("CLOUDFLARE_ACCOUNT_ID", "acc-1")
            .env(
                "KLAW_CLOUDFLARE_BASE_URL",
                format!("{}/client/v4", server.url),
            )
            // Everything logged, so that a token in any line would show.
            .env("KLAW_LOG_LEVEL", "trace");
        let o = c.output().unwrap();
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(!out.contains(TOKEN) && !err.contains(TOKEN), "{out}\n{err}");
        (o.status.success(), out, err)
    };
    let none = "/nonexistent/chromium";

    // The pages are named by a public address, not a name: a name is resolved here
    // before Cloudflare is asked (below), and a test machine may have no DNS.
    // The page, extracted as a local render's: the main content, the title.
    let (ok, out, err) = call(json!({"url": "https://93.184.215.14/app"}), none);
    assert!(ok, "{err}");
    assert!(out.contains("Rendered remotely"), "{out}");
    assert!(out.contains("slow work of water"), "{out}");
    assert!(!out.contains("menu"), "{out}");
    let asked = server.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0].path,
        "/client/v4/accounts/acc-1/browser-rendering/content"
    );
    assert_eq!(
        asked[0].header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(asked[0].body, json!({"url": "https://93.184.215.14/app"}));

    // The same caps: maxChars cuts the text.
    let (ok, out, err) = call(
        json!({"url": "https://93.184.215.14/app", "maxChars": 40}),
        none,
    );
    assert!(ok, "{err}");
    assert!(!out.contains("slow work of water"), "{out}");

    // Errors say what happened, never with the token.
    let (ok, _, err) = call(json!({"url": "https://93.184.215.14/denied"}), none);
    assert!(!ok);
    assert!(
        err.contains("refused the API token (401")
            && err.contains("Authentication error")
            && err.contains("CLOUDFLARE_API_TOKEN"),
        "{err}"
    );
    let (ok, _, err) = call(json!({"url": "https://93.184.215.14/busy"}), none);
    assert!(!ok);
    assert!(
        err.contains("rate-limited (429)") && err.contains("retry after 7 s"),
        "{err}"
    );
    let (ok, _, err) = call(json!({"url": "https://93.184.215.14/broken"}), none);
    assert!(!ok);
    assert!(
        err.contains("could not render https://93.184.215.14/broken")
            && err.contains("Navigation timeout of 30000 ms exceeded"),
        "{err}"
    );
    // A screenshot needs a local browser; a private address is refused before any
    // request leaves.
    let before = server.requests().len();
    let (ok, _, err) = call(
        json!({"url": "https://93.184.215.14/app", "screenshot": true}),
        none,
    );
    assert!(!ok);
    assert!(err.contains("screenshot"), "{err}");
    let (ok, _, err) = call(json!({"url": "http://127.0.0.1:9/"}), none);
    assert!(!ok);
    assert!(err.contains("127.0.0.1"), "{err}");
    assert_eq!(server.requests().len(), before);
    // The same rule as the local browser's: a name is resolved here and refused when it
    // resolves to a loopback or private address, before Cloudflare is asked (it was once
    // handed on unresolved).
    for url in [
        "http://localhost:9/",
        "http://LOCALHOST./admin",
        "https://localhost/",
    ] {
        let (ok, _, err) = call(json!({ "url": url }), none);
        assert!(!ok, "{url}");
        assert!(
            err.contains("Error [access_denied]") && err.contains("localhost"),
            "{url}: {err}"
        );
        assert_eq!(server.requests().len(), before, "{url}");
    }

    // A browser on the machine stays the default: Cloudflare is not asked.
    let (_, _, _) = call(json!({"url": "https://93.184.215.14/app"}), "/bin/true");
    assert_eq!(server.requests().len(), before);

    // No file the engine wrote holds the token either.
    for entry in walk(home.path()) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(TOKEN),
            "{}",
            entry.display()
        );
    }
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files.extend(walk(&p));
        } else {
            files.push(p);
        }
    }
    files
}
