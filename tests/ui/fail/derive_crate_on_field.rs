use klaw::ToolSchema;

#[derive(ToolSchema, serde::Deserialize)]
struct Options {
    #[schema(crate = "::klaw")]
    text: String,
}

fn main() {}
