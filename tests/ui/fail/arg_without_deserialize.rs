use klaw::{ToolError, ToolSchema, tool};

#[derive(ToolSchema)]
enum Mode {
    Fast,
    Slow,
}

#[tool(name = "run", description_ru = "Запускает задачу")]
async fn run(mode: Mode) -> Result<String, ToolError> {
    let _ = mode;
    Ok(String::new())
}

fn main() {}
