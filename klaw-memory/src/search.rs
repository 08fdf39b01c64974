//! `memory_search`: the best chunks of the agent's memory for a query.

use serde::Serialize;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use super::fuse::FoundBy;
use super::index::{Memory, SearchMode, blocking};
use super::store::Period;
use klaw_core::{Settings, ToolContext, ToolError, ToolSchema, tool};

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
    /// Когда это было: дата сообщения беседы или сохранения, ГГГГ-ММ-ДД в часовом поясе пользователя
    #[schema(
        description_en = "When it happened: the date of the conversation message or of saving, YYYY-MM-DD in the user's time zone"
    )]
    pub date: String,
    /// Оценка: чем больше, тем лучше (сравнима только внутри одного ответа)
    #[schema(description_en = "Score: higher is better (comparable within one answer only)")]
    pub score: f64,
    /// Кто нашёл: text (по словам), vector (по смыслу) или both
    #[schema(description_en = "Which side found it: text (words), vector (meaning) or both")]
    pub found_by: FoundBy,
    /// Номер фрагмента: memory_get с ним вернёт весь его документ
    #[schema(description_en = "The chunk's id: memory_get with it returns its whole document")]
    pub chunk_id: i64,
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
    description_ru = "Ищет в долговременной памяти то, что было сохранено раньше (memory_save, импорт заметок и бесед): факты о пользователе, договорённости, заметки, реплики прошлых разговоров. mode = hybrid (по умолчанию) ищет и по смыслу, и по словам; text — только по словам (имена, коды, точные термины); vector — только по смыслу (находит и на другом языке). from/to ограничивают поиск по дате события (для вопросов вроде «на прошлой неделе», «в мае 2023»: сначала узнай сегодняшнюю дату). Возвращает до topK фрагментов, лучшие первыми, с источником, датой, оценкой и тем, кто нашёл (foundBy). Пустой список — ничего похожего не сохранено.",
    description_en = "Searches long-term memory for what was saved earlier (memory_save, imported notes and conversations): facts about the user, agreements, notes, turns of past conversations. mode = hybrid (the default) searches by meaning and by words; text by words only (names, codes, exact terms); vector by meaning only (also finds text in another language). from/to limit the search by the date of the event (for questions like \"last week\" or \"in May 2023\": find out today's date first). Returns up to topK chunks, best first, with source, date, score and which side found each (foundBy). An empty list means nothing similar was saved.",
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
    /// Только с этой даты (включительно): ГГГГ-ММ-ДД или дата и время RFC 3339
    #[arg(
        description_en = "Only from this date on (inclusive): YYYY-MM-DD or an RFC 3339 date and time"
    )]
    from: Option<String>,
    /// Только до этой даты (включительно): ГГГГ-ММ-ДД или дата и время RFC 3339
    #[arg(
        description_en = "Only up to this date (inclusive): YYYY-MM-DD or an RFC 3339 date and time"
    )]
    to: Option<String>,
    settings: Settings,
) -> Result<MemorySearchResults, ToolError> {
    let query = query.trim().to_owned();
    if query.is_empty() {
        return Err(ToolError::invalid_arguments(
            "/query",
            "empty: say what to look for",
        ));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(ToolError::invalid_arguments(
            "/query",
            format!("longer than {MAX_QUERY_CHARS} characters: shorten it"),
        ));
    }
    // The schema says 1 to 50 too, but models do not always read it.
    if !(1..=MAX_TOP_K).contains(&top_k) {
        return Err(ToolError::invalid_arguments(
            "/topK",
            format!("must be between 1 and {MAX_TOP_K}, got {top_k}"),
        ));
    }
    // a date is a day in the user's time zone (the settings are checked at start-up)
    let tz = TimeZone::get(&settings.timezone).unwrap_or(TimeZone::UTC);
    let period = Period {
        from: from
            .as_deref()
            .map(|s| instant(s, &tz, Edge::Start, "/from"))
            .transpose()?,
        to: to
            .as_deref()
            .map(|s| instant(s, &tz, Edge::End, "/to"))
            .transpose()?,
    };
    if let (Some(f), Some(t)) = (period.from, period.to)
        && f >= t
    {
        return Err(ToolError::invalid_arguments(
            "/to",
            "before `from`: the period is empty",
        ));
    }
    let memory = ctx.shared_state::<Memory>();
    blocking(move || {
        // the day in the user's time zone, as `from`/`to` read it
        let day = |h: &super::store::Hit| {
            Timestamp::from_second(h.created_at)
                .map(|t| t.to_zoned(tz.clone()).date().to_string())
                .unwrap_or_else(|_| h.date.clone())
        };
        let hits = memory
            .memory(&ctx)?
            .search_in(&query, top_k as usize, mode, period)?;
        let results: Vec<MemoryHit> = hits
            .into_iter()
            .map(|h| MemoryHit {
                date: day(&h),
                chunk_id: h.id,
                content: h.content,
                source: h.source,
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

/// Which end of a period a date is.
#[derive(Clone, Copy)]
enum Edge {
    /// Its first second: `from`.
    Start,
    /// The second after its last: `to` (a whole day is kept).
    End,
}

/// A `from`/`to` argument as Unix seconds: a date (`2023-05-07`, a whole day in `tz`) or
/// a date and time with an offset (`2023-05-07T18:00:00+03:00`; `to` keeps that instant).
fn instant(s: &str, tz: &TimeZone, edge: Edge, pointer: &str) -> Result<i64, ToolError> {
    let s = s.trim();
    let bad = || {
        ToolError::invalid_arguments(
            pointer,
            format!(
                "`{s}` is not a date: use YYYY-MM-DD (2023-05-07) or an RFC 3339 date and \
                 time (2023-05-07T18:00:00+03:00)"
            ),
        )
    };
    let end = |t: i64| match edge {
        Edge::Start => t,
        Edge::End => t.saturating_add(1),
    };
    if let Ok(t) = s.parse::<Timestamp>() {
        return Ok(end(t.as_second()));
    }
    // a time without an offset is a time in the user's time zone (a bare date parses
    // as a date-time too, at midnight: only a value with a time part is read so)
    if s.len() > 10
        && let Ok(dt) = s.parse::<jiff::civil::DateTime>()
    {
        let zoned = dt.to_zoned(tz.clone()).map_err(|_| bad())?;
        return Ok(end(zoned.timestamp().as_second()));
    }
    let day: Date = s.parse().map_err(|_| bad())?;
    let day = match edge {
        Edge::Start => day,
        Edge::End => day.checked_add(1.day()).map_err(|_| bad())?,
    };
    let zoned = day.to_zoned(tz.clone()).map_err(|_| bad())?;
    Ok(zoned.timestamp().as_second())
}

/// Six significant decimals are plenty to rank by and keep the answer short.
fn round(score: f64) -> f64 {
    (score * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_is_a_whole_day_in_the_time_zone_and_an_instant_is_itself() {
        let moscow = TimeZone::get("Europe/Moscow").unwrap();
        // 2023-05-07 00:00 in Moscow is 2023-05-06 21:00 UTC
        assert_eq!(
            instant("2023-05-07", &moscow, Edge::Start, "/from").unwrap(),
            1_683_406_800
        );
        assert_eq!(
            instant("2023-05-07", &moscow, Edge::End, "/to").unwrap(),
            1_683_406_800 + 86_400
        );
        assert_eq!(
            instant("2023-05-07T18:00:00+03:00", &moscow, Edge::End, "/to").unwrap(),
            1_683_471_601
        );
        // without an offset: that time in the user's zone, not the whole day
        for local in [
            "2023-05-07T18:00:00",
            "2023-05-07 18:00",
            "2023-05-07T18:00",
        ] {
            assert_eq!(
                instant(local, &moscow, Edge::End, "/to").unwrap(),
                1_683_471_601,
                "{local}"
            );
        }
    }

    #[test]
    fn a_bad_date_names_the_argument_and_the_formats() {
        for bad in ["yesterday", "2023-13-01", "07.05.2023", ""] {
            let err = instant(bad, &TimeZone::UTC, Edge::Start, "/from").unwrap_err();
            let text = err.to_string();
            assert!(text.contains("YYYY-MM-DD"), "{bad}: {text}");
        }
    }
}
