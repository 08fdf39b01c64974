use klaw::{ToolError, tool};

#[tool(name = "echo")]
async fn echo(text: String) -> Result<String, ToolError> {
    Ok(text)
}

fn main() {}
