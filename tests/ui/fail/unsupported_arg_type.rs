use klaw::{ToolError, tool};

#[derive(serde::Deserialize)]
struct Point {
    x: i32,
    y: i32,
}

#[tool(name = "distance", description_ru = "Расстояние до точки")]
async fn distance(point: Point) -> Result<String, ToolError> {
    Ok(format!("{}", point.x.abs() + point.y.abs()))
}

fn main() {}
