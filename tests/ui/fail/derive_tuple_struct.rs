use klaw::ToolSchema;

#[derive(ToolSchema)]
struct Meters(f64);

fn main() {}
