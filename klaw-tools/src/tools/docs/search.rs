//! `docs_search`: hybrid search over the docs index, one result per matching chunk.

use serde::Serialize;

use super::index::{DocsIndex, body};
use crate::tools::memory::{FoundBy, SearchMode};
use crate::tools::run_blocking;
use crate::{ToolContext, ToolError, ToolSchema, tool};

/// The most results one call returns.
pub const MAX_TOP_K: u32 = 20;

/// One result of `docs_search`.
#[derive(Debug, Clone, PartialEq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocsHit {
    /// Где найдено: файл и раздел (`tools/files.md#file_read`); передай его в docs_read
    #[schema(
        description_en = "Where it was found: the file and section (`tools/files.md#file_read`); pass it to docs_read"
    )]
    pub path: String,
    /// Заголовок раздела, если результат внутри раздела
    #[schema(description_en = "The section's heading, when the result is inside a section")]
    pub heading: Option<String>,
    /// Найденный фрагмент текста
    #[schema(description_en = "The matching passage")]
    pub content: String,
    /// Оценка: чем больше, тем лучше
    #[schema(description_en = "Score: higher is better")]
    pub score: f64,
    /// Кто нашёл: text (по словам), vector (по смыслу) или both (оба)
    #[schema(description_en = "What found it: text (by words), vector (by meaning) or both")]
    pub found_by: FoundBy,
}

/// The answer of `docs_search`.
#[derive(Debug, Clone, PartialEq, Serialize, ToolSchema)]
pub struct DocsSearch {
    /// Результаты, лучшие первыми
    #[schema(description_en = "The results, best first")]
    pub results: Vec<DocsHit>,
}

/// Searches Klaw's own documentation.
#[tool(
    name = "docs_search",
    title_ru = "Поиск по документации",
    title_en = "Search the docs",
    description_ru = "Ищет в документации Klaw (по смыслу и по словам, на русском или английском): как устроены инструменты, настройки, ограничения, безопасность. Возвращает фрагменты с путём раздела; целиком раздел читай через docs_read.",
    description_en = "Searches Klaw's documentation (by meaning and by words, in Russian or English): how the tools work, configuration, limits, security. Returns passages with the section's path; read a whole section with docs_read.",
    read_only,
    idempotent,
    timeout = "5m",
    rename_all = "camelCase"
)]
pub async fn docs_search(
    ctx: ToolContext,
    /// Что искать: вопрос или несколько слов
    #[arg(description_en = "What to look for: a question or a few words")]
    query: String,
    /// Сколько результатов вернуть (1–20)
    #[arg(
        description_en = "How many results to return (1-20)",
        default = 5,
        minimum = 1,
        maximum = 20
    )]
    top_k: u32,
) -> Result<DocsSearch, ToolError> {
    if query.trim().is_empty() {
        return Err(ToolError::invalid_arguments(
            "/query",
            "empty: say what to look for",
        ));
    }
    // The schema says 1 to 20 too, but models do not always read it.
    if !(1..=MAX_TOP_K).contains(&top_k) {
        return Err(ToolError::invalid_arguments(
            "/topK",
            format!("must be between 1 and {MAX_TOP_K}"),
        ));
    }
    run_blocking("docs", move || {
        let index = ctx.shared_state::<DocsIndex>().ready(&ctx)?;
        let hits = index.search(&query, top_k as usize, SearchMode::Hybrid)?;
        let docs = super::all();
        let results = hits
            .into_iter()
            .map(|h| {
                let heading = h.source.split_once('#').and_then(|(file, anchor)| {
                    let doc = docs.iter().find(|d| d.path == file)?;
                    let i = doc.headings.iter().position(|x| x.anchor == anchor)?;
                    Some(doc.headings[i].text.clone())
                });
                DocsHit {
                    content: body(&h.content).to_owned(),
                    path: h.source,
                    heading,
                    score: h.score,
                    found_by: h.found_by,
                }
            })
            .collect();
        Ok(DocsSearch { results })
    })
    .await
}
