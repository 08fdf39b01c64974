use klaw::ToolSchema;

#[derive(ToolSchema, serde::Deserialize)]
#[schema(description_en = "Search options")]
struct Options {
    /// Текст
    #[schema(description_en = "The text")]
    text: String,
}

fn main() {}
