use klaw::{ToolError, tool};

#[derive(serde::Serialize)]
struct Pong {
    ok: bool,
}

#[tool(name = "ping", description_ru = "Проверяет связь")]
async fn ping() -> Result<Pong, ToolError> {
    Ok(Pong { ok: true })
}

fn main() {}
