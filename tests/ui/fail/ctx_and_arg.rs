use klaw::{ToolError, Workspace, tool};

#[tool(name = "ws_root", description_ru = "Показывает корень рабочей области")]
async fn ws_root(#[ctx] #[arg(rename = "workspace")] ws: Workspace) -> Result<String, ToolError> {
    Ok(ws.root().display().to_string())
}

fn main() {}
