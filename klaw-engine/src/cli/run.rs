//! `klaw-engine run`: the long-running engine. The gateway's channels (Telegram when a
//! token is set) feed the agent, one conversation per allowed chat, answers going back
//! through the gateway; the scheduler fires due jobs when a model is configured (also
//! with no channel); the MCP HTTP server runs beside when `mcp.enabled`. Stops on
//! SIGINT or SIGTERM: no new turns, running ones get a grace period, the engine shuts
//! down (the history already holds every message). This file decides what runs and
//! prints; the app runs it ([`crate::App::start_running`]).

use std::process::ExitCode;

use crate::Config;
use crate::llm::Model;

pub(crate) fn run(config: Config) -> ExitCode {
    let telegram = config
        .raw
        .gateway
        .telegram_token
        .as_ref()
        .map(crate::Secret::expose)
        .is_some_and(|t| !t.is_empty());
    let model = match Model::from_config(&config, None) {
        Ok(m) => Some(m),
        Err(e) if telegram => return super::fail(&e.to_string()),
        Err(_) => None,
    };
    let scheduled = model.is_some() && config.raw.scheduler.enabled;
    if !telegram && !config.raw.mcp.enabled && !scheduled {
        return super::fail(
            "nothing to run: set gateway.telegramToken (KLAW_TELEGRAM_TOKEN) for Telegram, \
             mcp.enabled (KLAW_MCP_ENABLED=true) for the MCP server over HTTP, \
             or llm.model (KLAW_LLM_MODEL) for scheduled jobs",
        );
    }
    let mcp_bind = if config.raw.mcp.enabled {
        let bind = config.raw.mcp.bind.addr();
        if let Err(e) = crate::mcp::http::check_start(bind, &config) {
            return super::fail(&e.to_string());
        }
        Some(bind)
    } else {
        None
    };
    let serve = move |app: std::sync::Arc<crate::App>| async move {
        let running = app.start_running(mcp_bind);
        eprintln!(
            "klaw-engine: running (channels: {}{}{}); SIGINT or SIGTERM to stop",
            app.gateway().channel_names().join(", "),
            if running.has_scheduler() {
                "; scheduler"
            } else {
                ""
            },
            mcp_bind
                .map(|b| format!("; MCP at http://{b}/mcp"))
                .unwrap_or_default()
        );
        if let Some(e) = running.serve(&app).await {
            eprintln!("klaw-engine: {e}");
        }
        ExitCode::SUCCESS
    };
    // Serving MCP over HTTP: a worker thread per core, as `mcp --http`.
    if mcp_bind.is_some() {
        super::run_front_serving(config, model, serve)
    } else {
        super::run_front(config, model, serve)
    }
}
