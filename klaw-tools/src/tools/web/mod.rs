//! The web group: `web_fetch` (a page's main content) and `web_search` (Brave Search or
//! SearXNG).
//!
//! No spelling of an address, no name and no redirect reaches a private address: every
//! URL and every resolved address is checked (`address.rs` says which addresses are
//! refused, `guard.rs` where the checks sit), and the connection goes to the address
//! that was checked. `web.allowedPrivateHosts` lists the private services a user does
//! want reached.

mod address;
mod extract;
mod fetch;
mod guard;
mod search;
mod settings;

pub use address::refusal;
pub use extract::Format;
pub use fetch::{WebPage, web_fetch};
pub use guard::{Guard, MAX_REDIRECTS, Refused};
pub use search::{SearchHit, SearchResults, web_search};
pub use settings::{BRAVE_ENDPOINT, WebSettings};
