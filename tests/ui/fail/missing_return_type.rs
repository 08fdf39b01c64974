use klaw::tool;

#[tool(name = "ping", description_ru = "Проверяет связь")]
async fn ping() {}

fn main() {}
