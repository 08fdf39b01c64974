use klaw::{ToolError, ToolSchema, tool};

/// An enum the derive refuses: the one error is here, not also at the tool below.
#[derive(serde::Deserialize, ToolSchema)]
enum Order {
    Ascending,
    By(String),
}

#[tool(name = "list_sorted", description_ru = "Сортирует список")]
async fn list_sorted(order: Order) -> Result<String, ToolError> {
    let _ = order;
    Ok(String::new())
}

fn main() {}
