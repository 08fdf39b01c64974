use klaw::{ToolError, tool};

#[tool(description_ru = "Повторяет текст")]
async fn echo(text: String) -> Result<String, ToolError> {
    Ok(text)
}

fn main() {}
