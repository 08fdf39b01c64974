use klaw::ToolSchema;

#[derive(ToolSchema)]
struct Query {
    #[schema(description = "The text")]
    text: String,
}

fn main() {}
