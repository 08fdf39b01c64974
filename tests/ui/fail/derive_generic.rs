use klaw::ToolSchema;

#[derive(ToolSchema)]
struct Page<T> {
    items: Vec<T>,
}

fn main() {}
