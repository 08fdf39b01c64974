//! The web group: `web_fetch` (a page's main content), `http_request` (one request to
//! an API, any common method), `web_search` (Brave Search or SearXNG) and, with a browser on the machine, `render_js` (a page that needs
//! JavaScript, in headless Chromium behind a guarded proxy, or where there is none and
//! `CLOUDFLARE_API_TOKEN` with `CLOUDFLARE_ACCOUNT_ID` are set, Cloudflare's Browser
//! Rendering: `remote.rs`; feature `render`).
//!
//! No spelling of an address, no name and no redirect reaches a private address: every
//! URL and every resolved address is checked (`address.rs` says which addresses are
//! refused, `guard.rs` where the checks sit), and the connection goes to the address
//! that was checked. `web.allowedPrivateHosts` lists the private services a user does
//! want reached.

mod address;
#[cfg(feature = "render")]
mod cdp;
mod clients;
mod extract;
mod fetch;
mod guard;
mod parse;
#[cfg(feature = "render")]
mod proxy;
#[cfg(feature = "render")]
mod remote;
#[cfg(feature = "render")]
mod render;
mod request;
mod search;
mod settings;

pub use address::refusal;
pub use extract::Format;
pub use fetch::{WebPage, web_fetch};
pub use guard::{Guard, MAX_REDIRECTS, Refused};
#[cfg(feature = "render")]
pub use remote::{CLOUDFLARE_API, RemoteBrowser, render_js_remote_tool};
#[cfg(feature = "render")]
pub use render::{BROWSERS, find_browser, render_js_tool};
pub use request::{Headers, HttpResponse, http_request};
pub use search::{SearchHit, SearchResults, web_search};
pub use settings::{BRAVE_ENDPOINT, WebSettings};
