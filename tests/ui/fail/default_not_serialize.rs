use klaw::{ToolError, ToolSchema, tool};

#[derive(ToolSchema, serde::Deserialize)]
enum Mode {
    Fast,
    Slow,
}

#[tool(name = "run", description_ru = "Запускает задачу")]
async fn run(#[arg(default = Mode::Fast)] mode: Mode) -> Result<String, ToolError> {
    Ok(match mode {
        Mode::Fast => "fast".into(),
        Mode::Slow => "slow".into(),
    })
}

fn main() {}
