use klaw::{ToolError, tool};

#[tool(name = "echo", description_ru = "Повторяет текст")]
async fn echo(text: &str) -> Result<String, ToolError> {
    Ok(text.to_owned())
}

fn main() {}
