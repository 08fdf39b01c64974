use klaw::tool;

#[tool(
    name = "bad name",
    descripton_ru = "Опечатка в ключе",
    timeout = "soon",
    read_only,
    destructive
)]
fn bad<T>(text: &str, query: String, #[arg(rename = "query")] other: String) -> String {
    format!("{text} {query} {other}")
}

fn main() {}
