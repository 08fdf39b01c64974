use klaw::{ToolError, tool};

#[tool(name = "echo", description_ru = "Повторяет текст")]
async fn echo(text: impl Into<String>) -> Result<String, ToolError> {
    Ok(text.into())
}

fn main() {}
