use klaw::tool;

#[tool(name = "ping", description_ru = "Проверяет связь")]
async fn ping() -> Result<String, std::io::Error> {
    Ok("pong".into())
}

fn main() {}
