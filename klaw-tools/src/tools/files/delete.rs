//! `file_delete`: removes one file.

use serde::Serialize;

use super::confine::{Confined, blocking, confine};
use crate::{ToolError, ToolSchema, Workspace, tool};

/// The answer of `file_delete`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileDeleted {
    /// Путь, как он был запрошен
    #[schema(description_en = "The path as requested")]
    pub path: String,
    /// Всегда true: файл удалён
    #[schema(description_en = "Always true: the file was deleted")]
    pub deleted: bool,
}

/// Deletes a workspace file.
#[tool(
    name = "file_delete",
    title_ru = "Удаление файла",
    title_en = "Delete a file",
    description_ru = "Удаляет один файл рабочей области. Папки не удаляет. Символическая ссылка удаляется сама, её цель не трогается.",
    description_en = "Deletes one file in the workspace. Does not delete directories. A symbolic link is removed itself; its target is left alone.",
    destructive
)]
pub async fn file_delete(
    ws: Workspace,
    /// Путь к файлу относительно рабочей области
    #[arg(description_en = "Path of the file, relative to the workspace")]
    path: String,
) -> Result<FileDeleted, ToolError> {
    let c = confine(&ws, &path)?;
    blocking(move || delete(&c)).await
}

fn delete(c: &Confined) -> Result<FileDeleted, ToolError> {
    let (parent, name) = c.split_name().ok_or_else(|| {
        ToolError::invalid_arguments("/path", format!("not a file path: {}", c.shown))
    })?;
    // The parent is opened beneath the root; the name is then removed without following
    // it, so a link is removed and never what it points to.
    let dir = c.open_dir(&parent)?;
    let meta = dir.symlink_metadata(&name).map_err(|e| c.err(e))?;
    if meta.is_dir() {
        return Err(ToolError::failed(format!(
            "is a directory: {}; file_delete removes files only",
            c.shown
        )));
    }
    dir.remove_file(&name).map_err(|e| c.err(e))?;
    Ok(FileDeleted {
        path: c.shown.clone(),
        deleted: true,
    })
}
