//! `memory_save`: chunks, embeds and indexes a text in one transaction.

use serde::Serialize;

use super::index::{Document, Memory, MemoryError, blocking};
use klaw_core::{Limits, ToolContext, ToolError, ToolSchema, tool};

/// The longest `source` `memory_save` accepts, in characters.
pub const MAX_SOURCE_CHARS: usize = 200;

/// The largest text one `memory_save` accepts, in bytes (also never more than
/// `maxFileSizeBytes`): about 64 chunks, a few seconds of embedding, well inside the
/// tool's time limit. Bigger documents go through `klaw-engine memory import`.
pub const MAX_SAVE_BYTES: u64 = 64 * 1024;

/// The answer of `memory_save`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemorySaved {
    /// Итог одной фразой
    #[schema(description_en = "The outcome in one sentence")]
    pub message: String,
    /// На сколько фрагментов разбит текст
    #[schema(description_en = "How many chunks the text was cut into")]
    pub chunks: u64,
    /// Сколько фрагментов сохранено
    #[schema(description_en = "How many chunks were stored")]
    pub inserted: u64,
    /// Сколько фрагментов уже было в памяти (не сохранены повторно)
    #[schema(description_en = "How many chunks were already stored (not stored again)")]
    pub duplicates: u64,
    /// true, если всё это уже было в памяти и ничего не добавлено
    #[schema(description_en = "True when all of it was already stored and nothing was added")]
    pub already_stored: bool,
}

/// Saves a text to the agent's memory.
#[tool(
    name = "memory_save",
    title_ru = "Запомнить",
    title_en = "Save to memory",
    description_ru = "Сохраняет текст в долговременную память, чтобы найти его потом через memory_search: факт о пользователе, договорённость, итог разговора, заметку. Длинный текст разбивается на фрагменты; точный повтор уже сохранённого не сохраняется второй раз (alreadyStored = true). Сохраняй законченные мысли с контекстом («Анна предпочитает встречи после 11:00»), а не обрывки. Для коротких постоянных фактов о пользователе и о себе есть memory_core_update.",
    description_en = "Saves a text to long-term memory so memory_search can find it later: a fact about the user, an agreement, the outcome of a conversation, a note. Long text is cut into chunks; an exact repeat of something already stored is not stored again (alreadyStored = true). Save complete thoughts with their context (\"Anna prefers meetings after 11:00\"), not fragments. For short permanent facts about the user and yourself use memory_core_update.",
    idempotent,
    rename_all = "camelCase"
)]
pub async fn memory_save(
    ctx: ToolContext,
    limits: Limits,
    /// Текст, который нужно запомнить
    #[arg(description_en = "The text to remember")]
    content: String,
    /// Откуда текст: manual (по умолчанию), имя беседы, файла
    #[arg(
        default = String::from("manual"),
        description_en = "Where the text comes from: manual (the default), a conversation, a file"
    )]
    source: String,
) -> Result<MemorySaved, ToolError> {
    if content.trim().is_empty() {
        return Err(ToolError::invalid_arguments(
            "/content",
            "empty: nothing to save",
        ));
    }
    let max = limits.max_file_size_bytes.min(MAX_SAVE_BYTES);
    if content.len() as u64 > max {
        return Err(ToolError::invalid_arguments(
            "/content",
            format!(
                "{} bytes, more than the {max} bytes one memory_save accepts: save it in parts (whole documents are imported with `klaw-engine memory import`)",
                content.len()
            ),
        ));
    }
    let source = source.trim().to_owned();
    if source.is_empty() || source.chars().count() > MAX_SOURCE_CHARS {
        return Err(ToolError::invalid_arguments(
            "/source",
            format!("must be 1 to {MAX_SOURCE_CHARS} characters"),
        ));
    }
    let memory = ctx.shared_state::<Memory>();
    let progress = ctx.progress();
    blocking(move || {
        let report = |done: usize, total: usize| {
            progress.report(
                done as u64,
                Some(total as u64),
                format!("embedded {done} of {total} chunks"),
            );
        };
        let doc = Document {
            content,
            source,
            created_at: None,
            context: None,
        };
        let r = memory
            .memory(&ctx)?
            .save_all_reporting(std::slice::from_ref(&doc), &report)?;
        if r.chunks == 0 {
            return Err(MemoryError::Empty.into());
        }
        let already_stored = r.inserted == 0;
        let message = if already_stored {
            "Already stored: this text was saved before; nothing new was added.".to_owned()
        } else if r.duplicates > 0 {
            format!(
                "Saved {} of {} chunks; {} were already stored.",
                r.inserted, r.chunks, r.duplicates
            )
        } else {
            format!("Saved ({}).", chunks_word(r.inserted))
        };
        Ok(MemorySaved {
            message,
            chunks: r.chunks as u64,
            inserted: r.inserted as u64,
            duplicates: r.duplicates as u64,
            already_stored,
        })
    })
    .await
}

fn chunks_word(n: usize) -> String {
    if n == 1 {
        "1 chunk".to_owned()
    } else {
        format!("{n} chunks")
    }
}
