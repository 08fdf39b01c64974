use klaw::tool;

#[tool(name = "echo", description_ru = "Повторяет текст")]
async fn echo(text: String) -> String {
    text
}

fn main() {}
