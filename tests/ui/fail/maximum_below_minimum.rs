use klaw::{ToolError, tool};

#[tool(name = "search", description_ru = "Ищет в памяти")]
async fn search(
    query: String,
    #[arg(default = 5, minimum = 10, maximum = 1)] limit: u32,
) -> Result<String, ToolError> {
    Ok(format!("{query} {limit}"))
}

fn main() {}
