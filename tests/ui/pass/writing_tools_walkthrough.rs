//! The walk-through of `doc/writing-tools.md`, kept compiling and true: the tool, its
//! schema as the page shows it, and the test the page writes for it.

use klaw::{ToolError, Workspace, tool};
use serde_json::json;

/// Reads a window of lines from a text file in the workspace.
#[tool(
    name = "note_read",
    description_ru = "Читает строки текстового файла из рабочей области",
    description_en = "Read lines of a text file in the workspace",
    title_ru = "Чтение заметки",
    title_en = "Read a note",
    read_only,
    timeout = "10s"
)]
async fn note_read(
    ws: Workspace,
    /// Путь относительно рабочей области
    #[arg(description_en = "Path relative to the workspace")]
    path: String,
    /// Первая строка (с 1)
    #[arg(rename = "startLine", default = 1)]
    start_line: u32,
    /// Сколько строк прочитать; по умолчанию — до конца файла
    max_lines: Option<u32>,
) -> Result<String, ToolError> {
    let text = std::fs::read_to_string(ws.root().join(&path))?;
    let lines = text
        .lines()
        .skip(start_line.saturating_sub(1) as usize)
        .take(max_lines.map_or(usize::MAX, |n| n as usize));
    Ok(lines.collect::<Vec<_>>().join("\n"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let kit = klaw::testing::Kit::new()?;
    let spec = kit.registry().by_name("note_read").unwrap().spec();
    let title = spec.title.as_ref().unwrap();
    assert_eq!((title.ru.as_str(), title.en.as_deref()), ("Чтение заметки", Some("Read a note")));
    assert_eq!(
        spec.input_schema,
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Путь относительно рабочей области",
                    "x-klaw-description-en": "Path relative to the workspace",
                },
                "startLine": {
                    "type": "integer", "minimum": 0, "maximum": 4294967295u32,
                    "description": "Первая строка (с 1)", "default": 1,
                },
                "max_lines": {
                    "type": ["integer", "null"], "minimum": 0, "maximum": 4294967295u32,
                    "description": "Сколько строк прочитать; по умолчанию — до конца файла",
                },
            },
            "required": ["path"],
            "additionalProperties": false,
        })
    );

    kit.write("notes.md", "a\nb\nc\n")?;
    let out = kit
        .call("note_read", json!({"path": "notes.md", "startLine": 2}))
        .await?;
    assert_eq!(out.text(), "b\nc");

    let err = kit
        .call("note_read", json!({"path": "missing.md"}))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let err = kit
        .call("note_read", json!({"path": "notes.md", "startLine": -1}))
        .await
        .unwrap_err();
    assert_eq!(err.pointer(), Some("/startLine"));
    Ok(())
}
