//! Conversations as memories: chat exports read into [`Turn`]s, and turns made into
//! [`Document`]s that are embedded with the turn before them as context.
//!
//! A turn alone is often not understood ("Yes, the blue one, 38 euros."); with the
//! question it answers it is. So each turn is stored as `speaker: text` (what a search
//! shows and searches by words), with the session's date and the previous turn of its
//! session as its context (embedded with it, not shown; see [`Document::context`]), its
//! time as the memory's time, and `<name>#<turn id>` as its source.
//!
//! Three shapes are read: JSON Lines with one turn per line (`speaker`, `text`,
//! `created_at`, optional `session` and `id`), a ChatGPT data export's
//! `conversations.json`, and a Telegram Desktop export's `result.json` (one chat, or the
//! whole account's).

use jiff::Timestamp;
use serde_json::Value;

use super::index::Document;

/// Context: at most this many characters of the previous turn.
const CONTEXT_CHARS: usize = 400;

/// Telegram chats have no sessions: a pause longer than this starts a new one (the
/// previous turn is then not used as context).
const TELEGRAM_SESSION_GAP: i64 = 6 * 3600;

/// Why a turn, a time or an export could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationError {
    /// A turn without `text` (or `content`), or with blank text.
    #[error("the turn has no text")]
    NoText,
    /// A turn without `speaker` (or `from`, or `role`).
    #[error("the turn has no speaker")]
    NoSpeaker,
    /// A `created_at` that is not a time (the JSON value, as written).
    #[error(
        "created_at {0} is not a time: use unix seconds, an RFC 3339 time or a \
         YYYY-MM-DD date, in years -9999 to 9999"
    )]
    NotATime(String),
    /// A ChatGPT export that is not an array of conversations.
    #[error("a ChatGPT export is an array of conversations")]
    NotConversations,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The conversation (or session) it belongs to; consecutive turns of one session are
    /// each other's context.
    pub session: String,
    /// Its id, unique within the export (`a1.07`, a Telegram message id, ...).
    pub id: String,
    /// Who wrote it.
    pub speaker: String,
    /// What was written.
    pub text: String,
    /// When, in Unix seconds, if known.
    pub created_at: Option<i64>,
}

impl Turn {
    /// A turn from one line of a JSON Lines conversation: `speaker` and `text` (or
    /// `content`), optional `created_at` (Unix seconds or RFC 3339), `session` and `id`
    /// (the `n`th line of a file without ids gets `<session>.<n>`).
    pub fn from_line(v: &Value, n: usize) -> Result<Self, ConversationError> {
        let field = |k: &str| v.get(k).and_then(Value::as_str).map(str::trim);
        let text = field("text")
            .or_else(|| field("content"))
            .filter(|t| !t.is_empty())
            .ok_or(ConversationError::NoText)?;
        let speaker = field("speaker")
            .or_else(|| field("from"))
            .or_else(|| field("role"))
            .filter(|s| !s.is_empty())
            .ok_or(ConversationError::NoSpeaker)?;
        let created_at = created_at(v.get("created_at").or_else(|| v.get("date")))?;
        let session = match v.get("session").or_else(|| v.get("session_id")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        let id = match v.get("id") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
            Some(Value::Number(n)) => n.to_string(),
            _ if session.is_empty() => n.to_string(),
            _ => format!("{session}.{n}"),
        };
        Ok(Self {
            session,
            id,
            speaker: speaker.to_owned(),
            text: text.to_owned(),
            created_at,
        })
    }

    /// Whether a JSON Lines object is a conversation turn (it names who wrote it:
    /// `speaker`, `from` or `role`; or it has `text` and no `content`) rather than a
    /// document (`content` alone).
    pub fn is_turn(v: &Value) -> bool {
        ["speaker", "from", "role"]
            .iter()
            .any(|k| v.get(k).is_some())
            || (v.get("text").is_some() && v.get("content").is_none())
    }
}

/// Which export a JSON document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportShape {
    /// ChatGPT's `conversations.json`: an array of conversations with a `mapping`.
    ChatGpt,
    /// Telegram Desktop's `result.json`: a chat with `messages`, or `chats.list` of them.
    Telegram,
}

/// Recognises a ChatGPT or Telegram export.
pub fn export_shape(json: &Value) -> Option<ExportShape> {
    match json {
        Value::Array(items) if items.iter().any(|c| c.get("mapping").is_some()) => {
            Some(ExportShape::ChatGpt)
        }
        Value::Object(o) if telegram_chat(o) => Some(ExportShape::Telegram),
        Value::Object(o)
            if o.get("chats")
                .and_then(|c| c.get("list"))
                .is_some_and(Value::is_array) =>
        {
            Some(ExportShape::Telegram)
        }
        _ => None,
    }
}

/// A Telegram chat: `messages` with Telegram's own fields (`date_unixtime`, or `type` and
/// `date`), or none yet and the chat's `type` (`personal_chat`, ...). Other JSON with a
/// `messages` array (an OpenAI request, say) is not one.
fn telegram_chat(o: &serde_json::Map<String, Value>) -> bool {
    let Some(messages) = o.get("messages").and_then(Value::as_array) else {
        return false;
    };
    if messages.is_empty() {
        return o.get("type").is_some_and(Value::is_string);
    }
    messages.iter().any(|m| {
        m.get("date_unixtime").is_some() || (m.get("type").is_some() && m.get("date").is_some())
    })
}

/// The turns of an export, conversations in file order, each in time order.
pub fn parse_export(json: &Value, shape: ExportShape) -> Result<Vec<Turn>, ConversationError> {
    match shape {
        ExportShape::ChatGpt => chatgpt(json),
        ExportShape::Telegram => telegram(json),
    }
}

/// ChatGPT: each conversation's current branch, from the root to `current_node` (edits
/// and regenerations left out), user and assistant messages with text.
fn chatgpt(json: &Value) -> Result<Vec<Turn>, ConversationError> {
    let conversations = json.as_array().ok_or(ConversationError::NotConversations)?;
    let mut turns = Vec::new();
    for (n, conv) in conversations.iter().enumerate() {
        let Some(mapping) = conv.get("mapping").and_then(Value::as_object) else {
            continue;
        };
        let session = conv
            .get("conversation_id")
            .or_else(|| conv.get("id"))
            .and_then(Value::as_str)
            .map_or_else(|| format!("conversation-{}", n + 1), str::to_owned);
        let conv_time = conv.get("create_time").and_then(seconds);
        // the branch shown: current_node up to the root (a cycle or a missing node ends it)
        let mut chain = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut node = conv.get("current_node").and_then(Value::as_str);
        while let Some(id) = node {
            if !seen.insert(id) {
                break; // a cycle
            }
            let Some(entry) = mapping.get(id) else { break };
            chain.push(entry);
            node = entry.get("parent").and_then(Value::as_str);
        }
        chain.reverse();
        for entry in chain {
            let Some(message) = entry.get("message").filter(|m| !m.is_null()) else {
                continue;
            };
            let role = message
                .pointer("/author/role")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if role != "user" && role != "assistant" {
                continue;
            }
            let text = message
                .pointer("/content/parts")
                .and_then(Value::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default();
            if text.trim().is_empty() {
                continue;
            }
            let id = message
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("{session}.{}", turns.len() + 1), str::to_owned);
            turns.push(Turn {
                session: session.clone(),
                id,
                speaker: role.to_owned(),
                text,
                created_at: message.get("create_time").and_then(seconds).or(conv_time),
            });
        }
    }
    Ok(turns)
}

/// Telegram: every chat's messages of type `message` with text; a service message, a
/// sticker or a photo without a caption is left out.
fn telegram(json: &Value) -> Result<Vec<Turn>, ConversationError> {
    let chats: Vec<&Value> = match json.pointer("/chats/list").and_then(Value::as_array) {
        Some(list) => list.iter().collect(),
        None => vec![json],
    };
    let mut turns = Vec::new();
    for chat in chats {
        let Some(messages) = chat.get("messages").and_then(Value::as_array) else {
            continue;
        };
        let chat_id = match chat.get("id") {
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            _ => chat
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("chat")
                .to_owned(),
        };
        let mut session = 0;
        let mut last: Option<i64> = None;
        for m in messages {
            if m.get("type").and_then(Value::as_str) != Some("message") {
                continue;
            }
            let text = telegram_text(m.get("text").unwrap_or(&Value::Null));
            if text.trim().is_empty() {
                continue;
            }
            let created_at = m
                .get("date_unixtime")
                .and_then(seconds)
                .or_else(|| m.get("date").and_then(seconds));
            if let (Some(t), Some(prev)) = (created_at, last)
                && t.saturating_sub(prev) > TELEGRAM_SESSION_GAP
            {
                session += 1;
            }
            last = created_at.or(last);
            let id = match m.get("id") {
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::String(s)) => s.clone(),
                _ => (turns.len() + 1).to_string(),
            };
            turns.push(Turn {
                session: format!("{chat_id}/{session}"),
                id: format!("{chat_id}.{id}"),
                speaker: m
                    .get("from")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_owned(),
                text,
                created_at,
            });
        }
    }
    Ok(turns)
}

/// A Telegram `text`: a string, or an array of strings and `{type, text}` entities.
fn telegram_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p {
                Value::String(s) => s.as_str(),
                other => other
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            })
            .collect(),
        _ => String::new(),
    }
}

/// A `created_at` value as Unix seconds ([`seconds`]); `None` when absent or null, an error
/// naming the forms that work when it is not a time.
pub fn created_at(v: Option<&Value>) -> Result<Option<i64>, ConversationError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => seconds(v)
            .map(Some)
            .ok_or_else(|| ConversationError::NotATime(v.to_string())),
    }
}

/// Numbers from this on are milliseconds (as seconds they would be past year 5000).
const MILLIS_FROM: i64 = 100_000_000_000;

/// Unix seconds from a number (fractions dropped; milliseconds recognised), a string of
/// digits, an RFC 3339 timestamp, or a date, or a date and time, without an offset (taken
/// as UTC); `None` for anything else and for times outside years -9999 to 9999.
pub fn seconds(v: &Value) -> Option<i64> {
    let n = match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))?,
        Value::String(s) => {
            let s = s.trim();
            if let Ok(n) = s.parse::<i64>() {
                n
            } else if let Ok(t) = s.parse::<Timestamp>() {
                t.as_second()
            } else {
                let dt: jiff::civil::DateTime = s.parse().ok()?;
                dt.to_zoned(jiff::tz::TimeZone::UTC)
                    .ok()?
                    .timestamp()
                    .as_second()
            }
        }
        _ => return None,
    };
    let n = if n.unsigned_abs() >= MILLIS_FROM.unsigned_abs() {
        n / 1000
    } else {
        n
    };
    Timestamp::from_second(n).ok().map(|t| t.as_second())
}

/// The turns as documents to save (empty turns left out): content `speaker: text`,
/// source `<name>#<turn id>`, the turn's time, and as context the session's date and
/// the previous turn of the same session (cut to 400 characters).
pub fn documents(turns: &[Turn], name: &str) -> Vec<Document> {
    let mut docs = Vec::with_capacity(turns.len());
    // the last turn of each session: sessions may interleave in a file
    let mut last: std::collections::HashMap<&str, &Turn> = std::collections::HashMap::new();
    for t in turns {
        if t.text.trim().is_empty() {
            continue;
        }
        let before = last.insert(t.session.as_str(), t);
        let mut context = String::new();
        if let Some(day) = t.created_at.and_then(day) {
            context.push_str(&day);
        }
        if let Some(p) = before {
            if !context.is_empty() {
                context.push('\n');
            }
            context.push_str(&line(p, CONTEXT_CHARS));
        }
        docs.push(Document {
            content: line(t, usize::MAX),
            source: format!("{name}#{}", t.id),
            created_at: t.created_at,
            context: (!context.is_empty()).then_some(context),
        });
    }
    docs
}

/// A speaker's name is cut to this many characters.
const SPEAKER_CHARS: usize = 60;

/// `speaker: text`, the text cut to `max` characters.
fn line(t: &Turn, max: usize) -> String {
    format!(
        "{}: {}",
        cut(t.speaker.trim(), SPEAKER_CHARS),
        cut(t.text.trim(), max)
    )
}

/// `s`, cut to `max` characters with `…`.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() > max {
        s.chars().take(max).chain(['…']).collect()
    } else {
        s.to_owned()
    }
}

/// `YYYY-MM-DD` (UTC) of Unix seconds.
fn day(secs: i64) -> Option<String> {
    let t = Timestamp::from_second(secs).ok()?;
    Some(t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn turn(session: &str, id: &str, speaker: &str, text: &str, t: i64) -> Turn {
        Turn {
            session: session.into(),
            id: id.into(),
            speaker: speaker.into(),
            text: text.into(),
            created_at: Some(t),
        }
    }

    #[test]
    fn each_turn_is_embedded_with_the_previous_turn_of_its_session_and_the_date() {
        let turns = [
            turn(
                "s1",
                "s1.01",
                "Sam",
                "Which jacket did you buy?",
                1_709_400_000,
            ),
            turn(
                "s1",
                "s1.02",
                "Priya",
                "Yes, the blue one, 38 euros.",
                1_709_400_060,
            ),
            turn("s2", "s2.01", "Sam", "Morning!", 1_712_000_000),
        ];
        let docs = documents(&turns, "chat.jsonl");
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[1].content, "Priya: Yes, the blue one, 38 euros.");
        assert_eq!(docs[1].source, "chat.jsonl#s1.02");
        assert_eq!(docs[1].created_at, Some(1_709_400_060));
        assert_eq!(
            docs[1].context.as_deref(),
            Some("2024-03-02\nSam: Which jacket did you buy?")
        );
        // a new session does not look back into the last one
        assert_eq!(docs[2].context.as_deref(), Some("2024-04-01"));

        // sessions interleaved in one file: each turn follows its own session's last
        let mixed = [
            turn("a", "a.1", "Sam", "Which jacket?", 1_709_400_000),
            turn("b", "b.1", "Oleg", "Код?", 1_709_400_010),
            turn("a", "a.2", "Priya", "The blue one.", 1_709_400_020),
        ];
        let docs = documents(&mixed, "x");
        assert_eq!(
            docs[2].context.as_deref(),
            Some("2024-03-02\nSam: Which jacket?")
        );
    }

    #[test]
    fn a_jsonl_turn_needs_text_and_a_speaker_and_gets_an_id() {
        let t = Turn::from_line(
            &json!({"speaker": "Sam", "text": " Hi ", "created_at": "2024-03-02T19:05:00+00:00", "session": "b1"}),
            3,
        )
        .unwrap();
        assert_eq!(
            (
                t.id.as_str(),
                t.speaker.as_str(),
                t.text.as_str(),
                t.created_at
            ),
            ("b1.3", "Sam", "Hi", Some(1_709_406_300))
        );
        assert!(Turn::is_turn(&json!({"speaker": "Sam", "text": "Hi"})));
        // the common chat shape: role and content
        let t = Turn::from_line(&json!({"role": "user", "content": "Hello"}), 1).unwrap();
        assert_eq!((t.speaker.as_str(), t.text.as_str()), ("user", "Hello"));
        assert!(Turn::is_turn(&json!({"role": "user", "content": "Hello"})));
        assert!(!Turn::is_turn(&json!({"content": "a note"})));
        let err = |v| Turn::from_line(&v, 1).unwrap_err().to_string();
        assert_eq!(
            err(json!({"speaker": "Sam", "text": "  "})),
            "the turn has no text"
        );
        assert_eq!(err(json!({"text": "Hi"})), "the turn has no speaker");
        assert!(
            err(json!({"speaker": "S", "text": "Hi", "created_at": "soon"})).contains("not a time")
        );
    }

    #[test]
    fn chatgpt_reads_the_current_branch_in_order() {
        let export = json!([{
            "title": "Trip", "conversation_id": "c1", "create_time": 1_700_000_000.5,
            "current_node": "n3",
            "mapping": {
                "root": {"message": null, "parent": null},
                "n1": {"parent": "root", "message": {"id": "m1", "author": {"role": "user"},
                       "create_time": 1_700_000_001.0,
                       "content": {"content_type": "text", "parts": ["Where should I go in May?"]}}},
                "n2x": {"parent": "n1", "message": {"id": "old", "author": {"role": "assistant"},
                       "content": {"parts": ["A discarded answer"]}}},
                "n2": {"parent": "n1", "message": {"id": "m2", "author": {"role": "assistant"},
                       "content": {"parts": ["Lisbon."]}}},
                "sys": {"parent": "n2", "message": {"author": {"role": "system"}, "content": {"parts": ["x"]}}},
                "n3": {"parent": "sys", "message": {"id": "m3", "author": {"role": "user"},
                       "create_time": 1_700_000_100,
                       "content": {"parts": ["Book it."]}}}
            }
        }]);
        assert_eq!(export_shape(&export), Some(ExportShape::ChatGpt));
        let turns = parse_export(&export, ExportShape::ChatGpt).unwrap();
        let got: Vec<(&str, &str, &str, Option<i64>)> = turns
            .iter()
            .map(|t| {
                (
                    t.id.as_str(),
                    t.speaker.as_str(),
                    t.text.as_str(),
                    t.created_at,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "m1",
                    "user",
                    "Where should I go in May?",
                    Some(1_700_000_001)
                ),
                ("m2", "assistant", "Lisbon.", Some(1_700_000_000)),
                ("m3", "user", "Book it.", Some(1_700_000_100)),
            ]
        );
    }

    #[test]
    fn telegram_reads_text_entities_and_splits_sessions_at_long_pauses() {
        let export = json!({
            "name": "Priya", "type": "personal_chat", "id": 42,
            "messages": [
                {"id": 1, "type": "message", "date": "2024-03-02T19:05:00",
                 "date_unixtime": "1709406300", "from": "Priya", "text": "Hi!"},
                {"id": 2, "type": "service", "action": "phone_call", "date_unixtime": "1709406310"},
                {"id": 3, "type": "message", "date_unixtime": "1709406400", "from": "Sam",
                 "text": ["See ", {"type": "link", "text": "https://example.org"}, " now"]},
                {"id": 4, "type": "message", "date_unixtime": "1709406500", "from": "Sam",
                 "photo": "photos/1.jpg", "text": ""},
                {"id": 5, "type": "message", "date_unixtime": "1709506400", "from": "Priya",
                 "text": "Next day"}
            ]
        });
        assert_eq!(export_shape(&export), Some(ExportShape::Telegram));
        let turns = parse_export(&export, ExportShape::Telegram).unwrap();
        let got: Vec<(&str, &str, &str)> = turns
            .iter()
            .map(|t| (t.session.as_str(), t.id.as_str(), t.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("42/0", "42.1", "Hi!"),
                ("42/0", "42.3", "See https://example.org now"),
                ("42/1", "42.5", "Next day"),
            ]
        );
        let whole_account = json!({"chats": {"list": [export]}});
        assert_eq!(export_shape(&whole_account), Some(ExportShape::Telegram));
        assert_eq!(
            parse_export(&whole_account, ExportShape::Telegram)
                .unwrap()
                .len(),
            3
        );
    }

    #[test]
    fn other_json_is_no_export_and_odd_values_are_no_time() {
        assert_eq!(export_shape(&json!({"content": "x"})), None);
        // an OpenAI-style request has messages too, but it is no Telegram chat
        assert_eq!(
            export_shape(&json!({"messages": [{"role": "user", "content": "hi"}]})),
            None
        );
        assert_eq!(export_shape(&json!([1, 2])), None);
        assert_eq!(seconds(&json!("2024-03-02T19:05:00")), Some(1_709_406_300));
        assert_eq!(
            seconds(&json!("2024-03-02T19:05:00+01:00")),
            Some(1_709_402_700)
        );
        assert_eq!(seconds(&json!(1.7e9)), Some(1_700_000_000));
        assert_eq!(seconds(&json!(f64::MAX)), None);
        assert_eq!(seconds(&json!(1_709_406_300_123_i64)), Some(1_709_406_300));
        assert_eq!(seconds(&json!("-9223372036854775808")), None);
        assert_eq!(seconds(&json!("soon")), None);
        assert_eq!(seconds(&json!("2021-03-04")), Some(1_614_816_000));
        assert_eq!(seconds(&json!(null)), None);
        // a broken mapping (a cycle) ends the branch instead of looping
        let cyclic = json!([{"current_node": "a", "mapping": {
            "a": {"parent": "b", "message": {"author": {"role": "user"}, "content": {"parts": ["x"]}}},
            "b": {"parent": "a", "message": null}
        }}]);
        assert_eq!(
            parse_export(&cyclic, ExportShape::ChatGpt).unwrap().len(),
            1
        );
    }
}
