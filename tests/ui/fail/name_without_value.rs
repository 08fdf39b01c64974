use klaw::{ToolError, tool};

#[tool(name, description_ru = "Повторяет текст")]
async fn echo(text: String) -> Result<String, ToolError> {
    Ok(text)
}

fn main() {}
