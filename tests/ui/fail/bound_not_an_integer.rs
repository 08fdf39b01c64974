use klaw::{ToolError, tool};

#[tool(name = "search", description_ru = "Ищет в памяти")]
async fn search(query: String, #[arg(maximum = 0.5)] score: f64) -> Result<String, ToolError> {
    Ok(format!("{query} {score}"))
}

fn main() {}
