use klaw::{ToolError, tool};

#[tool(name = "echo", description_ru = "Повторяет значение")]
async fn echo<T: ToString>(value: T) -> Result<String, ToolError> {
    Ok(value.to_string())
}

fn main() {}
