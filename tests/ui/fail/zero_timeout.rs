use klaw::{ToolError, tool};

#[tool(name = "slow", description_ru = "Долгая операция", timeout = "0s")]
async fn slow() -> Result<String, ToolError> {
    Ok(String::new())
}

fn main() {}
