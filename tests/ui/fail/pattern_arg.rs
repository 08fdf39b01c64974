use klaw::{ToolError, tool};

#[tool(name = "sum", description_ru = "Складывает два числа")]
async fn sum((a, b): (i64, i64)) -> Result<String, ToolError> {
    Ok((a + b).to_string())
}

fn main() {}
