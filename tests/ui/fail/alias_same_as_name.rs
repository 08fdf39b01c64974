use klaw::{ToolError, tool};

#[tool(name = "echo", description_ru = "Повторяет текст")]
async fn echo(#[arg(alias = "text")] text: String) -> Result<String, ToolError> {
    Ok(text)
}

fn main() {}
