use klaw::ToolSchema;

struct Cursor;

#[derive(ToolSchema)]
struct Query {
    text: String,
    cursor: Cursor,
}

fn main() {}
