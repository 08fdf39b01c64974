//! Test-only tools (feature `fixtures`, never in a release build): the fixtures the MCP
//! conformance suite calls (each documents the scenario it serves), and `echo`, the trivial tool the MCP benchmark compares
//! with an equivalent FastMCP server.

use std::time::Duration;

use klaw_tools::{Attachment, Log, Progress, ResourceContent, ToolError, ToolOutput, tool};

/// Returns its text (the benchmarks' trivial tool).
#[tool(
    name = "echo",
    title_ru = "Эхо",
    title_en = "Echo",
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
    title_ru = "Тест: простой текст",
    title_en = "Test: simple text",
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
    title_ru = "Тест: ошибка",
    title_en = "Test: error",
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
    title_ru = "Тест: ход работы",
    title_en = "Test: progress",
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

/// A 1×1 red PNG.
const RED_PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A WAV file of one silent sample (8 kHz, 8-bit mono).
fn silent_wav() -> Vec<u8> {
    let mut w = Vec::with_capacity(45);
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&37u32.to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes());
    w.extend_from_slice(&8u16.to_le_bytes());
    w.extend_from_slice(b"data");
    w.extend_from_slice(&1u32.to_le_bytes());
    w.push(128);
    w
}

fn image() -> Attachment {
    Attachment::Image {
        mime_type: "image/png".into(),
        data: RED_PIXEL_PNG.to_vec(),
    }
}

fn resource() -> Attachment {
    Attachment::Resource {
        uri: "test://embedded-resource".into(),
        mime_type: "text/plain".into(),
        content: ResourceContent::Text("This is an embedded resource content.".into()),
    }
}

/// Conformance `tools-call-image`: an image and no text.
#[tool(
    name = "test_image_content",
    title_ru = "Тест: картинка",
    title_en = "Test: image",
    description_ru = "Тестовый инструмент: возвращает картинку",
    description_en = "Test tool: returns an image",
    read_only
)]
pub async fn test_image_content() -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::plain("").with_attachment(image()))
}

/// Conformance `tools-call-audio`: a sound and no text.
#[tool(
    name = "test_audio_content",
    title_ru = "Тест: звук",
    title_en = "Test: audio",
    description_ru = "Тестовый инструмент: возвращает звук",
    description_en = "Test tool: returns audio",
    read_only
)]
pub async fn test_audio_content() -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::plain("").with_attachment(Attachment::Audio {
        mime_type: "audio/wav".into(),
        data: silent_wav(),
    }))
}

/// Conformance `tools-call-embedded-resource`: a text document.
#[tool(
    name = "test_embedded_resource",
    title_ru = "Тест: документ",
    title_en = "Test: resource",
    description_ru = "Тестовый инструмент: возвращает встроенный документ",
    description_en = "Test tool: returns an embedded resource",
    read_only
)]
pub async fn test_embedded_resource() -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::plain("").with_attachment(resource()))
}

/// Conformance `tools-call-mixed-content`: text, an image and a document.
#[tool(
    name = "test_multiple_content_types",
    title_ru = "Тест: разное содержимое",
    title_en = "Test: mixed content",
    description_ru = "Тестовый инструмент: возвращает текст, картинку и документ",
    description_en = "Test tool: returns text, an image and a resource",
    read_only
)]
pub async fn test_multiple_content_types() -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::plain("Multiple content types test:")
        .with_attachment(image())
        .with_attachment(resource()))
}

/// Conformance `tools-call-with-logging`: three log messages, 50 ms apart.
#[tool(
    name = "test_tool_with_logging",
    title_ru = "Тест: журнал",
    title_en = "Test: logging",
    description_ru = "Тестовый инструмент: пишет в журнал три сообщения",
    description_en = "Test tool: logs three messages",
    read_only
)]
pub async fn test_tool_with_logging(log: Log) -> Result<String, ToolError> {
    for message in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ] {
        log.info(message);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok("Logging test completed".into())
}
