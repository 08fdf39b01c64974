use klaw::{ToolError, tool};

struct Notes;

impl Notes {
    #[tool(name = "notes_count", description_ru = "Считает заметки")]
    async fn count(&self) -> Result<String, ToolError> {
        Ok("0".into())
    }
}

fn main() {}
