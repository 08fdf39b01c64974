//! `file`: the legacy multi-operation tool, forwarding to the single-purpose ones.

use serde::{Deserialize, Serialize};

use super::FilesSettings;
use super::{delete, list, read, write};
use crate::{Limits, ToolError, ToolOutput, ToolSchema, Workspace, tool};

/// An operation of the legacy `file` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToolSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Прочитать файл (как file_read)
    #[schema(description_en = "Read a file (as file_read)")]
    ReadFile,
    /// Перезаписать файл (как file_write с mode = overwrite)
    #[schema(description_en = "Overwrite a file (as file_write with mode = overwrite)")]
    WriteFile,
    /// Показать папку (как file_list)
    #[schema(description_en = "List a folder (as file_list)")]
    ListDir,
    /// Удалить файл (как file_delete)
    #[schema(description_en = "Delete a file (as file_delete)")]
    DeleteFile,
}

/// The legacy multi-operation file tool.
#[tool(
    name = "file",
    title_ru = "Файлы (старый интерфейс)",
    title_en = "Files (legacy interface)",
    description_ru = "Устаревший инструмент для совместимости: operation = read_file, write_file, list_dir или delete_file. Предпочитай file_read, file_write, file_list, file_delete и file_edit — у них больше возможностей.",
    description_en = "Legacy tool kept for compatibility: operation = read_file, write_file, list_dir or delete_file. Prefer file_read, file_write, file_list, file_delete and file_edit, which do more.",
    destructive
)]
pub async fn file(
    ws: Workspace,
    limits: Limits,
    #[ctx] files: FilesSettings,
    /// Операция: read_file, write_file, list_dir или delete_file
    #[arg(description_en = "Operation: read_file, write_file, list_dir or delete_file")]
    operation: Operation,
    /// Путь относительно рабочей области
    #[arg(description_en = "Path relative to the workspace")]
    path: String,
    /// Текст для write_file
    #[arg(description_en = "The text for write_file")]
    content: Option<String>,
) -> Result<ToolOutput, ToolError> {
    let out = match operation {
        Operation::ReadFile => json(read::file_read(ws, limits, path, None, None).await?)?,
        Operation::WriteFile => {
            let content = content.ok_or_else(|| {
                ToolError::invalid_arguments("/content", "missing: write_file needs it")
            })?;
            json(write::file_write(ws, limits, path, content, write::WriteMode::Overwrite).await?)?
        }
        Operation::ListDir => json(list::file_list(ws, files, path, false).await?)?,
        Operation::DeleteFile => json(delete::file_delete(ws, path).await?)?,
    };
    Ok(out)
}

fn json<T: Serialize>(v: T) -> Result<ToolOutput, ToolError> {
    serde_json::to_value(v)
        .map(ToolOutput::json)
        .map_err(|e| ToolError::failed("the result could not be serialized").with_source(e))
}
