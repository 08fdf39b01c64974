//! Utility tools: `current_time`.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;

use crate::{Settings, ToolError, ToolSchema, tool};

/// The answer of `current_time`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentTime {
    /// Дата, YYYY-MM-DD
    #[schema(description_en = "Date, YYYY-MM-DD")]
    pub date: String,
    /// Время, HH:MM:SS
    #[schema(description_en = "Time, HH:MM:SS")]
    pub time: String,
    /// День недели по-английски (Monday ... Sunday)
    #[schema(description_en = "Weekday in English (Monday ... Sunday)")]
    pub weekday: String,
    /// Часовой пояс IANA
    #[schema(description_en = "IANA time zone")]
    pub timezone: String,
    /// Смещение от UTC, например +03:00
    #[schema(description_en = "Offset from UTC, e.g. +03:00")]
    pub utc_offset: String,
    /// Момент времени в RFC 3339 со смещением
    #[schema(description_en = "The instant in RFC 3339 with the offset")]
    pub iso: String,
    /// Секунды Unix
    #[schema(description_en = "Unix seconds")]
    pub unix: i64,
}

/// The current date and time in `settings.timezone`, or in `timezone` when given.
#[tool(
    name = "current_time",
    title_ru = "Текущее время",
    title_en = "Current time",
    description_ru = "Возвращает текущие дату, время, день недели и смещение от UTC в часовом поясе пользователя (или в указанном). Вызывай в начале любой задачи, связанной с расписанием или временем.",
    description_en = "Returns the current date, time, weekday and UTC offset in the user's time zone (or the one given). Call it at the start of any scheduling or time-sensitive task.",
    read_only
)]
pub async fn current_time(
    settings: Settings,
    /// Часовой пояс IANA, например Europe/Moscow; по умолчанию — пояс из настроек
    #[arg(description_en = "IANA time zone, e.g. Europe/Moscow; defaults to the configured one")]
    timezone: Option<String>,
) -> Result<CurrentTime, ToolError> {
    let name = timezone.unwrap_or(settings.timezone);
    let tz = time_zone(&name)?;
    let canonical = tz.iana_name().unwrap_or(&name).to_owned();
    Ok(at(Timestamp::now(), &canonical, &tz))
}

/// Looks up an IANA time zone, naming close matches when it does not exist: an
/// `invalid_arguments` error at `/timezone` (a tool's `timezone` argument).
pub fn time_zone(name: &str) -> Result<TimeZone, ToolError> {
    zone_named(name).map_err(|problem| ToolError::invalid_arguments("/timezone", problem))
}

/// [`time_zone`] for a setting rather than a tool's argument: the problem alone
/// (``unknown time zone `X`; did you mean `Y`?``), which the setting's error names.
pub fn zone_named(name: &str) -> Result<TimeZone, String> {
    if name.eq_ignore_ascii_case("utc") {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|_| {
        let names: Vec<String> = jiff::tz::db().available().map(|n| n.to_string()).collect();
        let close = crate::by_similarity(name, names.iter().map(String::as_str));
        let close: Vec<_> = close.into_iter().filter(|(s, _)| *s > 0.85).collect();
        let hint = match close.first() {
            Some((_, n)) => format!("; did you mean `{n}`?"),
            None => "; use an IANA name such as Europe/Moscow or America/New_York".into(),
        };
        format!("unknown time zone `{name}`{hint}")
    })
}

/// An offset from UTC in seconds as `+HH:MM` / `-HH:MM`.
pub fn utc_offset(seconds: i32) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let abs = seconds.unsigned_abs();
    format!("{sign}{:02}:{:02}", abs / 3600, abs % 3600 / 60)
}

fn at(now: Timestamp, name: &str, tz: &TimeZone) -> CurrentTime {
    let zoned = now.to_zoned(tz.clone());
    CurrentTime {
        date: zoned.strftime("%Y-%m-%d").to_string(),
        time: zoned.strftime("%H:%M:%S").to_string(),
        weekday: zoned.strftime("%A").to_string(),
        timezone: if name.eq_ignore_ascii_case("utc") {
            "UTC".into()
        } else {
            name.to_owned()
        },
        utc_offset: utc_offset(zoned.offset().seconds()),
        iso: zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
        unix: now.as_second(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_a_known_instant_in_a_zone() {
        let ts: Timestamp = "2026-11-22T04:23:21Z".parse().unwrap();
        let tz = time_zone("Europe/Moscow").unwrap();
        let t = at(ts, "Europe/Moscow", &tz);
        assert_eq!(t.date, "2026-11-22");
        assert_eq!(t.time, "07:23:21");
        assert_eq!(t.weekday, "Sunday");
        assert_eq!(t.utc_offset, "+03:00");
        assert_eq!(t.iso, "2026-11-22T07:23:21+03:00");
        let t = at(
            ts,
            "America/St_Johns",
            &time_zone("America/St_Johns").unwrap(),
        );
        assert_eq!(t.utc_offset, "-03:30");
    }

    #[test]
    fn unknown_zone_is_named_with_a_suggestion() {
        let e = time_zone("Europe/Moskow").unwrap_err();
        assert!(e.is_invalid_arguments());
        assert_eq!(
            e.message(),
            "/timezone: unknown time zone `Europe/Moskow`; did you mean `Europe/Moscow`?"
        );
        assert_eq!(
            zone_named("Europe/Moskow").unwrap_err(),
            "unknown time zone `Europe/Moskow`; did you mean `Europe/Moscow`?"
        );
    }
}
