use klaw::{ToolError, tool};

#[tool(name = "echo", description_ru = "Эхо", title_ru = " ")]
async fn echo(text: String) -> Result<String, ToolError> {
    Ok(text)
}

#[tool(name = "echo2", description_ru = "Эхо", title_en = "Echo")]
async fn echo2(text: String) -> Result<String, ToolError> {
    Ok(text)
}

fn main() {}
