use klaw::{ToolError, tool};

#[tool(name = "echo", description_ru = "Повторяет текст")]
async fn echo(#[arg(minimum = 1)] text: String) -> Result<String, ToolError> {
    Ok(text)
}

fn main() {}
