use klaw::ToolSchema;

#[derive(ToolSchema)]
enum Shape {
    Circle { radius: f64 },
    Square,
}

fn main() {}
