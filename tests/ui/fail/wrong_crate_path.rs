use klaw::{ToolError, tool};

#[tool(
    name = "echo",
    description_ru = "Повторяет текст",
    crate = "::klaw_nope"
)]
async fn echo(text: String) -> Result<String, ToolError> {
    Ok(text)
}

fn main() {}
