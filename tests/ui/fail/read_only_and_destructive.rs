use klaw::{ToolError, tool};

#[tool(
    name = "wipe",
    description_ru = "Стирает заметки",
    read_only,
    destructive
)]
async fn wipe() -> Result<String, ToolError> {
    Ok(String::new())
}

fn main() {}
