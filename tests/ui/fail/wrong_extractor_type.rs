use klaw::{ToolError, tool};

struct Database;

#[tool(name = "db_ping", description_ru = "Проверяет базу данных")]
async fn db_ping(#[ctx] db: Database) -> Result<String, ToolError> {
    let _ = db;
    Ok("pong".into())
}

fn main() {}
