use klaw::{ToolError, tool};

#[tool(name = "answer", description_ru = "Отвечает")]
async unsafe fn answer() -> Result<String, ToolError> {
    Ok(String::new())
}

fn main() {}
