use klaw::{ToolError, tool};

#[tool(name = "echo", description_ru = "Повторяет текст", read_only = "yes")]
async fn echo(text: String) -> Result<String, ToolError> {
    Ok(text)
}

fn main() {}
