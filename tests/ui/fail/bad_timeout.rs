use klaw::{ToolError, tool};

#[tool(
    name = "slow",
    description_ru = "Долгая операция",
    timeout = "30 seconds"
)]
async fn slow() -> Result<String, ToolError> {
    Ok(String::new())
}

fn main() {}
