use klaw::{ToolError, tool};

#[tool(name = "search", description_ru = "Ищет в памяти")]
async fn search(query: String, #[arg(minimum = -1)] limit: Option<u32>) -> Result<String, ToolError> {
    Ok(format!("{query} {limit:?}"))
}

fn main() {}
