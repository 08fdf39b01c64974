use klaw::ToolSchema;

#[derive(ToolSchema, serde::Deserialize)]
struct Query {
    text: String,
    #[serde(flatten)]
    paging: Paging,
}

#[derive(ToolSchema, serde::Deserialize)]
struct Paging {
    limit: u32,
}

fn main() {}
