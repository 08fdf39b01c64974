use klaw::tool;

#[tool(name = "echo", description_ru = "Повторяет текст")]
struct Echo;

fn main() {}
