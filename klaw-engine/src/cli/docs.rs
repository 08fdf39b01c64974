//! `klaw-engine docs index`: the search index of the embedded documentation (the
//! `docs_*` tools) brought in step now, with a progress bar.

use std::process::ExitCode;

use super::{fail, init_logging, out};
use crate::{Config, Engine};

/// `docs index`: brings the docs' search index in step with the embedded docs and
/// says what was done.
pub(super) fn index(config: Config, force: bool) -> ExitCode {
    init_logging(&config);
    let engine = match Engine::new(config) {
        Ok(e) => e,
        Err(e) => return fail(&e.to_string()),
    };
    let bar = super::call::Bar::new();
    let ctx = match bar.sink() {
        Some(sink) => engine.context().clone().with_listener(sink),
        None => engine.context().clone(),
    };
    let result = klaw_tools::tools::docs::sync_context(&ctx, force);
    bar.finish();
    match result {
        Ok(r) => {
            out(&format!(
                "docs index: {} indexed, {} unchanged, {} removed; {} in {:.1} s ({})",
                crate::doctor::plural(r.indexed, "file"),
                r.unchanged,
                r.removed,
                crate::doctor::plural(r.chunks, "chunk"),
                r.elapsed.as_secs_f64(),
                engine
                    .config()
                    .data_dir
                    .join(klaw_tools::tools::docs::DOCS_DB)
                    .display()
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("docs index: {e}")),
    }
}
