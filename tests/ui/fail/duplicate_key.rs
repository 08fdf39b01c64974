use klaw::{ToolError, tool};

#[tool(name = "echo", description_ru = "Повторяет текст", name = "echo2")]
async fn echo(text: String) -> Result<String, ToolError> {
    Ok(text)
}

fn main() {}
