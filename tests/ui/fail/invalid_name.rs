use klaw::{ToolError, tool};

#[tool(name = "file.read", description_ru = "Читает файл")]
async fn file_read(path: String) -> Result<String, ToolError> {
    Ok(path)
}

fn main() {}
