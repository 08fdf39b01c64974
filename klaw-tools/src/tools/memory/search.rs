//! `memory_search`: the best chunks of the agent's memory for a query.

use serde::Serialize;

use super::fuse::FoundBy;
use super::index::{Memory, SearchMode, blocking};
use crate::{ToolContext, ToolError, ToolSchema, tool};

/// The largest `topK` `memory_search` accepts.
pub const MAX_TOP_K: u32 = 50;
/// The longest query `memory_search` accepts, in characters.
pub const MAX_QUERY_CHARS: usize = 2000;

/// One memory found by `memory_search`.
#[derive(Debug, Clone, PartialEq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryHit {
    /// Текст фрагмента
    #[schema(description_en = "The chunk's text")]
    pub content: String,
    /// Откуда он: manual, путь файла, беседа
    #[schema(description_en = "Where it came from: manual, a file path, a conversation")]
    pub source: String,
    /// Когда сохранён, ГГГГ-ММ-ДД (UTC)
    #[schema(description_en = "When it was saved, YYYY-MM-DD (UTC)")]
    pub date: String,
    /// Оценка: чем больше, тем лучше (сравнима только внутри одного ответа)
    #[schema(description_en = "Score: higher is better (comparable within one answer only)")]
    pub score: f64,
    /// Кто нашёл: text (по словам), vector (по смыслу) или both
    #[schema(description_en = "Which side found it: text (words), vector (meaning) or both")]
    pub found_by: FoundBy,
}

/// The answer of `memory_search`.
#[derive(Debug, Clone, PartialEq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemorySearchResults {
    /// Режим поиска: hybrid, text или vector
    #[schema(description_en = "The search mode: hybrid, text or vector")]
    pub mode: SearchMode,
    /// Сколько результатов найдено
    #[schema(description_en = "How many results were found")]
    pub count: u64,
    /// Результаты, лучшие первыми
    #[schema(description_en = "The results, best first")]
    pub results: Vec<MemoryHit>,
}

/// Searches the agent's memory.
#[tool(
    name = "memory_search",
    title_ru = "Поиск в памяти",
    title_en = "Search memory",
    description_ru = "Ищет в долговременной памяти то, что было сохранено раньше (memory_save, импорт заметок): факты о пользователе, договорённости, заметки. mode = hybrid (по умолчанию) ищет и по смыслу, и по словам; text — только по словам (имена, коды, точные термины); vector — только по смыслу (находит и на другом языке). Возвращает до topK фрагментов, лучшие первыми, с источником, датой, оценкой и тем, кто нашёл (foundBy). Пустой список — ничего похожего не сохранено.",
    description_en = "Searches long-term memory for what was saved earlier (memory_save, imported notes): facts about the user, agreements, notes. mode = hybrid (the default) searches by meaning and by words; text by words only (names, codes, exact terms); vector by meaning only (also finds text in another language). Returns up to topK chunks, best first, with source, date, score and which side found each (foundBy). An empty list means nothing similar was saved.",
    read_only,
    idempotent,
    rename_all = "camelCase"
)]
pub async fn memory_search(
    ctx: ToolContext,
    /// Что искать: вопрос, фраза или ключевые слова
    #[arg(description_en = "What to look for: a question, a phrase or keywords")]
    query: String,
    /// Сколько результатов вернуть, от 1 до 50
    #[arg(
        default = 10,
        minimum = 1,
        maximum = 50,
        description_en = "How many results to return, 1 to 50"
    )]
    top_k: u32,
    /// Как искать: hybrid (смысл и слова), text (только слова) или vector (только смысл)
    #[arg(
        default = SearchMode::Hybrid,
        description_en = "How to search: hybrid (meaning and words), text (words only) or vector (meaning only)"
    )]
    mode: SearchMode,
) -> Result<MemorySearchResults, ToolError> {
    let query = query.trim().to_owned();
    if query.is_empty() {
        return Err(ToolError::invalid_arguments(
            "/query",
            "the query is empty: say what to look for",
        ));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(ToolError::invalid_arguments(
            "/query",
            format!("the query is longer than {MAX_QUERY_CHARS} characters: shorten it"),
        ));
    }
    // The schema says 1 to 50 too, but models do not always read it.
    if !(1..=MAX_TOP_K).contains(&top_k) {
        return Err(ToolError::invalid_arguments(
            "/topK",
            format!("topK must be between 1 and {MAX_TOP_K}, got {top_k}"),
        ));
    }
    let memory = ctx.shared_state::<Memory>();
    blocking(move || {
        let hits = memory.memory(&ctx)?.search(&query, top_k as usize, mode)?;
        let results: Vec<MemoryHit> = hits
            .into_iter()
            .map(|h| MemoryHit {
                content: h.content,
                source: h.source,
                date: h.date,
                score: round(h.score),
                found_by: h.found_by,
            })
            .collect();
        Ok(MemorySearchResults {
            mode,
            count: results.len() as u64,
            results,
        })
    })
    .await
}

/// Six significant decimals are plenty to rank by and keep the answer short.
fn round(score: f64) -> f64 {
    (score * 1e6).round() / 1e6
}
