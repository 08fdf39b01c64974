use klaw::{ToolError, tool};

#[tool(name = "answer", description_ru = "Отвечает")]
const async fn answer() -> Result<String, ToolError> {
    Ok(String::new())
}

fn main() {}
