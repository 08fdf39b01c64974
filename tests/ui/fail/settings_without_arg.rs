use klaw::{ToolError, ToolSchema, tool};

/// The tool's own settings, named like the built-in extractor.
#[derive(serde::Deserialize, ToolSchema)]
struct Settings {
    /// Заголовок
    title: String,
}

#[tool(name = "report_render", description_ru = "Строит отчёт")]
async fn report_render(settings: Settings) -> Result<String, ToolError> {
    Ok(settings.title)
}

fn main() {}
