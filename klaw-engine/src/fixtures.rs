//! Test-only tools (feature `fixtures`, never in a release build): the fixtures the MCP
//! conformance suite calls, and `echo`, the trivial tool the MCP benchmark compares
//! with an equivalent FastMCP server.

use std::time::Duration;

use klaw_tools::{Progress, ToolError, tool};

/// Returns its text (the benchmarks' trivial tool).
#[tool(
    name = "echo",
    description_ru = "Возвращает переданный текст (инструмент для тестов и замеров)",
    description_en = "Returns the text it is given (a tool for tests and benchmarks)",
    read_only
)]
pub async fn echo(
    /// Текст
    #[arg(description_en = "The text")]
    text: String,
) -> Result<String, ToolError> {
    Ok(text)
}

/// Conformance `tools-call-simple-text`: text content.
#[tool(
    name = "test_simple_text",
    description_ru = "Тестовый инструмент: возвращает простой текст",
    description_en = "Test tool: returns simple text",
    read_only
)]
pub async fn test_simple_text() -> Result<String, ToolError> {
    Ok("This is a simple text response for testing.".into())
}

/// Conformance `tools-call-error`: a tool error (`isError: true` with a message).
#[tool(
    name = "test_error_handling",
    description_ru = "Тестовый инструмент: всегда завершается ошибкой",
    description_en = "Test tool: always fails",
    read_only
)]
pub async fn test_error_handling() -> Result<String, ToolError> {
    Err(ToolError::failed(
        "This tool intentionally returns an error for testing",
    ))
}

/// Conformance `tools-call-with-progress`: three progress reports, 0, 50 and 100 of 100.
#[tool(
    name = "test_tool_with_progress",
    description_ru = "Тестовый инструмент: сообщает о ходе работы три раза",
    description_en = "Test tool: reports progress three times",
    read_only
)]
pub async fn test_tool_with_progress(progress: Progress) -> Result<String, ToolError> {
    for done in [0, 50, 100] {
        progress.report(done, Some(100), format!("{done}%"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok("Progress test completed".into())
}
