use klaw::{ToolError, tool};

#[tool(name = "file_read", description_ru = "Читает файл")]
async fn file_read(
    path: String,
    #[arg(rename = "path")] file_path: Option<String>,
) -> Result<String, ToolError> {
    Ok(file_path.unwrap_or(path))
}

fn main() {}
