//! A minimal rmcp server, written as rmcp's documentation shows (`#[tool_router]`,
//! `#[tool_handler]`, `#[tokio::main]`), with one tool of three arguments: the same
//! `convert_temperature` that `benches/mcp.rs` links into Klaw's engine and
//! `benches/fastmcp_echo.py` gives FastMCP. Configured as Klaw configures itself: stdin and stdout read as
//! non-blocking pipes (`stdio_pipes`), HTTP connections with `TCP_NODELAY`, and the
//! tool router built once.
//!
//! Run with: `rmcp-peer` (stdio) or `rmcp-peer --http 127.0.0.1:0` (prints its address).

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ConvertArgs {
    /// The temperature value
    value: f64,
    /// Its scale: C, F or K
    scale: String,
    /// The scale wanted: C, F or K
    #[serde(default = "celsius")]
    target: String,
}

fn celsius() -> String {
    "C".into()
}

#[derive(Clone)]
struct Peer {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Peer {
    #[tool(
        description = "Convert a temperature between Celsius (C), Fahrenheit (F) and Kelvin (K)"
    )]
    fn convert_temperature(
        &self,
        Parameters(ConvertArgs {
            value,
            scale: from,
            target: to,
        }): Parameters<ConvertArgs>,
    ) -> Result<String, ErrorData> {
        let celsius = match parse_scale(&from)? {
            'C' => value,
            'F' => (value - 32.0) * 5.0 / 9.0,
            _ => value - 273.15,
        };
        if celsius < -273.15 {
            return Err(ErrorData::invalid_params("below absolute zero", None));
        }
        let out = match parse_scale(&to)? {
            'C' => celsius,
            'F' => celsius * 9.0 / 5.0 + 32.0,
            _ => celsius + 273.15,
        };
        Ok(format!("{out:.2} {}", to.to_uppercase()))
    }
}

fn parse_scale(s: &str) -> Result<char, ErrorData> {
    match s.trim().to_uppercase().as_str() {
        "C" | "CELSIUS" => Ok('C'),
        "F" | "FAHRENHEIT" => Ok('F'),
        "K" | "KELVIN" => Ok('K'),
        other => Err(ErrorData::invalid_params(
            format!("unknown scale `{other}`: use C, F or K"),
            None,
        )),
    }
}

// The router built once and kept (the macro's default builds it again per request).
#[tool_handler(router = self.tool_router)]
impl ServerHandler for Peer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

impl Peer {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, bind] = args.as_slice()
        && flag == "--http"
    {
        let router = Peer::new();
        let service = StreamableHttpService::new(
            move || Ok(router.clone()),
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default(),
        );
        let app = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind(bind.as_str()).await?;
        eprintln!(
            "rmcp-peer: MCP over HTTP at http://{}/mcp",
            listener.local_addr()?
        );
        use axum::serve::ListenerExt;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await?;
        return Ok(());
    }
    let running = Peer::new()
        .serve(rmcp::transport::io::stdio_pipes())
        .await?;
    running.waiting().await?;
    Ok(())
}
