//! `docs_list`: every embedded document with its title, size and sections.

use serde::Serialize;

use super::Doc;
use crate::{ToolError, ToolSchema, tool};

/// A section of a document, as `docs_list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
pub struct DocsSection {
    /// Путь раздела для docs_read (`tools/files.md#file_read`)
    #[schema(description_en = "The section's path for docs_read (`tools/files.md#file_read`)")]
    pub path: String,
    /// Заголовок
    #[schema(description_en = "The heading")]
    pub heading: String,
}

/// A document, as `docs_list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
pub struct DocsEntry {
    /// Путь для docs_read (относительно doc/)
    #[schema(description_en = "The path for docs_read (relative to doc/)")]
    pub path: String,
    /// Заголовок документа
    #[schema(description_en = "The document's title")]
    pub title: String,
    /// Размер в байтах
    #[schema(description_en = "Size in bytes")]
    pub size: u64,
    /// Разделы верхнего уровня (##)
    #[schema(description_en = "Its top-level sections (##)")]
    pub sections: Vec<DocsSection>,
}

/// The answer of `docs_list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
pub struct DocsList {
    /// Документы, по пути
    #[schema(description_en = "The documents, by path")]
    pub docs: Vec<DocsEntry>,
}

/// Lists the embedded documentation.
#[tool(
    name = "docs_list",
    title_ru = "Оглавление документации",
    title_en = "List the docs",
    description_ru = "Показывает все файлы документации Klaw: путь, заголовок, размер и разделы (пути разделов можно передать в docs_read).",
    description_en = "Lists every file of Klaw's documentation: path, title, size and sections (pass a section's path to docs_read).",
    read_only,
    idempotent
)]
pub async fn docs_list() -> Result<DocsList, ToolError> {
    Ok(list(super::embedded()))
}

/// `docs_list` over `docs`.
pub fn list(docs: &[(&str, &str)]) -> DocsList {
    DocsList {
        docs: docs
            .iter()
            .map(|(path, text)| {
                let doc = Doc::new(path, text);
                DocsEntry {
                    path: (*path).to_owned(),
                    title: doc.title().to_owned(),
                    size: text.len() as u64,
                    sections: doc
                        .headings
                        .iter()
                        .filter(|h| h.level == 2)
                        .map(|h| DocsSection {
                            path: format!("{path}#{}", h.anchor),
                            heading: h.text.clone(),
                        })
                        .collect(),
                }
            })
            .collect(),
    }
}
