use klaw::ToolSchema;

#[derive(ToolSchema, serde::Deserialize)]
#[serde(rename_all = "camel")]
struct Query {
    text: String,
}

fn main() {}
