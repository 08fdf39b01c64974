//! `klaw-engine mcp`: the engine served to MCP clients, over stdio or, with `--http`,
//! over Streamable HTTP (the address from the command line or `mcp.bind`). The serving
//! itself is the app's ([`crate::App::serve_mcp_stdio`], [`crate::App::serve_mcp_http`]).

use std::process::ExitCode;

use crate::Config;
use crate::llm::Model;

/// The model of an MCP front end: the client's, with `llm.provider: "mcp-sampling"`
/// (then `subagent_spawn` is served and runs on it); none otherwise (the MCP client is
/// the agent).
fn mcp_model(config: &Config) -> Result<Option<Model>, ExitCode> {
    if config.raw.llm.provider != crate::llm::Provider::McpSampling {
        return Ok(None);
    }
    Model::from_config(config, None)
        .map(Some)
        .map_err(|e| super::fail(&e.to_string()))
}

/// `klaw-engine mcp`: serves the engine over stdio until the client leaves.
pub(super) fn stdio(config: Config) -> ExitCode {
    let model = match mcp_model(&config) {
        Ok(m) => m,
        Err(code) => return code,
    };
    super::run_front(config, model, |app| async move {
        match app.serve_mcp_stdio().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => super::fail(&e.to_string()),
        }
    })
}

/// `klaw-engine mcp --http [ADDR]`: serves the engine over HTTP until a signal.
pub(super) fn http(config: Config, addr: &str) -> ExitCode {
    let bind = if addr.is_empty() {
        config.raw.mcp.bind.addr()
    } else {
        match addr.parse() {
            Ok(b) => b,
            Err(_) => {
                return super::fail(&format!(
                    "--http {addr:?} is not an address and port such as 127.0.0.1:8765"
                ));
            }
        }
    };
    // Refused before anything starts.
    if let Err(e) = crate::mcp::http::check_start(bind, &config) {
        return super::fail(&e.to_string());
    }
    let model = match mcp_model(&config) {
        Ok(m) => m,
        Err(code) => return code,
    };
    super::run_front_serving(config, model, |app| async move {
        match app.serve_mcp_http(bind).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => super::fail(&e.to_string()),
        }
    })
}
