//! A job's schedule: a cron expression (5 fields, or 6 with seconds first; `@daily`
//! and the other aliases; `L`, `W`, `#`) parsed by `croner`, in an IANA time zone.
//! Next runs are computed on the absolute time line with jiff's rules for the zone, so
//! a wall-clock time that a DST change skips runs once (at the first instant after the
//! gap) and one it repeats runs once (the first time).

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

/// Why a schedule could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The cron expression is wrong; `detail` says what and where.
    #[error("invalid cron expression `{expr}`: {detail}")]
    Cron {
        /// The expression as given.
        expr: String,
        /// What is wrong (`minute 61 is out of range 0-59`).
        detail: String,
    },
    /// No time zone has that name.
    #[error(
        "unknown time zone `{zone}`: use an IANA name such as Europe/Berlin, America/New_York or UTC"
    )]
    Zone {
        /// The name as given.
        zone: String,
    },
}

/// A parsed cron expression in a time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    tz: TimeZone,
    zone: String,
}

/// The fields of a 6-field expression, with their ranges (seconds first).
const FIELDS: [(&str, u32, u32); 6] = [
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
];

/// The aliases croner knows.
const ALIASES: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Schedules parsed before, by expression and zone: a tick that claims many due jobs
/// parses each stored expression once per process, not once per claim. Emptied when it
/// grows past [`CACHE_LIMIT`] (a store of many distinct jobs, or a long-lived engine).
static PARSED: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<(String, String), Schedule>>,
> = std::sync::LazyLock::new(Default::default);

/// Most schedules kept in [`PARSED`].
const CACHE_LIMIT: usize = 20_000;

impl Schedule {
    /// [`Schedule::parse`], remembered: the stored jobs' expressions, parsed again and
    /// again by the runner, come from here after the first time. Errors are not kept.
    pub fn parse_cached(expr: &str, zone: &str) -> Result<Self, ScheduleError> {
        let key = (expr.to_owned(), zone.to_owned());
        let lock = || {
            PARSED
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(s) = lock().get(&key) {
            return Ok(s.clone());
        }
        let parsed = Self::parse(expr, zone)?;
        let mut cache = lock();
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, parsed.clone());
        Ok(parsed)
    }

    /// Parses `expr` in the zone `zone` (an IANA name).
    pub fn parse(expr: &str, zone: &str) -> Result<Self, ScheduleError> {
        let tz = TimeZone::get(zone.trim()).map_err(|_| ScheduleError::Zone {
            zone: zone.to_owned(),
        })?;
        let bad = |detail: String| ScheduleError::Cron {
            expr: expr.to_owned(),
            detail,
        };
        check_fields(expr).map_err(bad)?;
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(expr.trim())
            .map_err(|e| bad(croner_detail(&e)))?;
        // A pattern that matches nothing (`0 0 30 2 *`) is no schedule either.
        let probe = Timestamp::UNIX_EPOCH.to_zoned(tz.clone());
        if cron.find_next_occurrence(&probe, false).is_err() {
            return Err(bad("it never matches a real date".into()));
        }
        Ok(Self {
            cron,
            tz,
            zone: zone.trim().to_owned(),
        })
    }

    /// The zone's name.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The first run strictly after `t`, or `None` when there is none (within
    /// croner's search limit).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        self.next_zoned_after(t).map(|z| z.timestamp())
    }

    /// The first run strictly after `t`, in the schedule's zone.
    pub fn next_zoned_after(&self, t: Timestamp) -> Option<Zoned> {
        let from = t.to_zoned(self.tz.clone());
        let next = self.cron.find_next_occurrence(&from, false).ok()?;
        // Never backwards nor in place, whatever the search does around a DST change.
        (next.timestamp() > t).then_some(next)
    }

    /// The next `n` runs after `t`, in the schedule's zone.
    pub fn upcoming(&self, t: Timestamp, n: usize) -> Vec<Zoned> {
        let mut out = Vec::with_capacity(n);
        let mut at = t;
        while out.len() < n {
            let Some(z) = self.next_zoned_after(at) else {
                break;
            };
            at = z.timestamp();
            out.push(z);
        }
        out
    }
}

/// Checks each numeric value against its field's range, so the error names the field
/// (`minute 61 is out of range 0-59`); what is not a plain number (names, `L`, `W`,
/// `#`, `?`) is left to croner.
fn check_fields(expr: &str) -> Result<(), String> {
    let expr = expr.trim();
    if expr.is_empty() {
        return Err("it is empty".into());
    }
    if let Some(alias) = expr.strip_prefix('@') {
        let alias = format!("@{}", alias.to_lowercase());
        if ALIASES.contains(&alias.as_str()) {
            return Ok(());
        }
        return Err(format!(
            "unknown alias `{expr}`; aliases: {}",
            ALIASES.join(", ")
        ));
    }
    let parts: Vec<&str> = expr.split_whitespace().collect();
    let fields: &[(&str, u32, u32)] = match parts.len() {
        5 => &FIELDS[1..],
        6 => &FIELDS,
        n => {
            return Err(format!(
                "{n} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 \
                 (second first)"
            ));
        }
    };
    for (part, (name, min, max)) in parts.iter().zip(fields) {
        for item in part.split(',') {
            if item.is_empty() {
                return Err(format!("{name} `{part}` has an empty list item"));
            }
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => (r, Some(s)),
                None => (item, None),
            };
            if let Some(step) = step {
                match step.parse::<u32>() {
                    Ok(0) => return Err(format!("{name} step `/0` must be at least 1")),
                    Ok(_) => {}
                    Err(_) => {
                        return Err(format!("{name} step `/{step}` is not a whole number"));
                    }
                }
            }
            // `#` and `L`/`W` forms: the day part is checked below when it is numeric.
            let range = range.split('#').next().unwrap_or(range);
            for value in range.split('-') {
                let value = value.trim_end_matches(['L', 'W', 'l', 'w']);
                if let Ok(v) = value.parse::<u64>()
                    && (v < u64::from(*min) || v > u64::from(*max))
                {
                    return Err(format!("{name} {v} is out of range {min}-{max}"));
                }
            }
        }
    }
    Ok(())
}

/// croner's message, without its type's prefix.
fn croner_detail(e: &croner::errors::CronError) -> String {
    use croner::errors::CronError as E;
    match e {
        E::EmptyPattern => "it is empty".into(),
        E::InvalidPattern(m) | E::IllegalCharacters(m) | E::ComponentError(m) => {
            m.trim_end_matches('.').to_owned()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_schedule_is_the_parsed_one_and_errors_are_not_kept() {
        let t = Timestamp::from_second(1_790_000_000).unwrap();
        let parsed = Schedule::parse("30 2 * * *", "Europe/Berlin").unwrap();
        for _ in 0..2 {
            let cached = Schedule::parse_cached("30 2 * * *", "Europe/Berlin").unwrap();
            assert_eq!(cached.upcoming(t, 3), parsed.upcoming(t, 3));
            assert_eq!(cached.zone(), "Europe/Berlin");
        }
        for _ in 0..2 {
            let e = Schedule::parse_cached("61 * * * *", "UTC").unwrap_err();
            assert!(e.to_string().contains("minute 61"), "{e}");
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(expr: &str, zone: &str, after: &str) -> String {
        Schedule::parse(expr, zone)
            .unwrap()
            .next_after(at(after))
            .unwrap()
            .to_string()
    }

    fn runs(expr: &str, zone: &str, after: &str, n: usize) -> Vec<String> {
        Schedule::parse(expr, zone)
            .unwrap()
            .upcoming(at(after), n)
            .iter()
            .map(|z| z.timestamp().to_string())
            .collect()
    }

    #[test]
    fn five_and_six_fields_and_aliases() {
        assert_eq!(
            next("30 9 * * *", "UTC", "2026-01-01T00:00:00Z"),
            "2026-01-01T09:30:00Z"
        );
        assert_eq!(
            next("15 30 9 * * *", "UTC", "2026-01-01T00:00:00Z"),
            "2026-01-01T09:30:15Z"
        );
        assert_eq!(
            next("* * * * * *", "UTC", "2026-01-01T00:00:00Z"),
            "2026-01-01T00:00:01Z"
        );
        assert_eq!(
            next("@daily", "UTC", "2026-01-01T00:00:00Z"),
            "2026-01-02T00:00:00Z"
        );
        assert_eq!(
            next("@hourly", "UTC", "2026-01-01T00:10:00Z"),
            "2026-01-01T01:00:00Z"
        );
        assert_eq!(
            next("0 12 * * MON", "UTC", "2026-01-01T00:00:00Z"),
            "2026-01-05T12:00:00Z"
        );
    }

    #[test]
    fn last_weekday_and_nth() {
        // The last day of February 2026.
        assert_eq!(
            next("0 0 L * *", "UTC", "2026-02-01T00:00:00Z"),
            "2026-02-28T00:00:00Z"
        );
        // The weekday nearest the 15th of August 2026 (a Saturday): Friday the 14th.
        assert_eq!(
            next("0 0 15W * *", "UTC", "2026-08-01T00:00:00Z"),
            "2026-08-14T00:00:00Z"
        );
        // The second Monday of March 2026.
        assert_eq!(
            next("0 0 * * 1#2", "UTC", "2026-03-01T00:00:00Z"),
            "2026-03-09T00:00:00Z"
        );
        // The last Friday of January 2026.
        assert_eq!(
            next("0 0 * * 5#L", "UTC", "2026-01-01T00:00:00Z"),
            "2026-01-30T00:00:00Z"
        );
        // Both day fields: either is enough (the 1st, or a Monday), as in classic cron.
        assert_eq!(
            next("0 0 1 * MON", "UTC", "2026-01-01T00:00:01Z"),
            "2026-01-05T00:00:00Z"
        );
    }

    #[test]
    fn errors_say_what_and_where() {
        let e = |expr: &str| Schedule::parse(expr, "UTC").unwrap_err().to_string();
        assert!(
            e("61 * * * *").contains("minute 61 is out of range 0-59"),
            "{}",
            e("61 * * * *")
        );
        assert!(e("0 25 * * *").contains("hour 25 is out of range 0-23"));
        assert!(e("61 0 * * * *").contains("second 61 is out of range 0-59"));
        assert!(e("0 0 0 * *").contains("day of month 0 is out of range 1-31"));
        assert!(e("0 0 1 13 *").contains("month 13 is out of range 1-12"));
        assert!(e("0 0 * * 9").contains("day of week 9 is out of range 0-7"));
        assert!(e("*/0 * * * *").contains("minute step `/0`"));
        assert!(e("* * *").contains("3 fields"));
        assert!(e("@sometimes").contains("unknown alias"));
        assert!(e("").contains("empty"));
        assert!(
            e("0 0 30 2 *").contains("never matches"),
            "{}",
            e("0 0 30 2 *")
        );
        let junk = e("a b c d e");
        assert!(
            junk.starts_with("invalid cron expression `a b c d e`: "),
            "{junk}"
        );
        let zone = Schedule::parse("* * * * *", "Mars/Olympus").unwrap_err();
        assert_eq!(
            zone,
            ScheduleError::Zone {
                zone: "Mars/Olympus".into()
            }
        );
    }

    /// Berlin springs forward on 2026-03-29 (02:00 → 03:00): 02:30 does not exist and
    /// the job runs once, at 03:00 local (01:00 UTC); the next day at 02:30 again.
    #[test]
    fn berlin_spring_forward_runs_once() {
        assert_eq!(
            runs("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 3),
            [
                "2026-03-29T01:00:00Z",
                "2026-03-30T00:30:00Z",
                "2026-03-31T00:30:00Z"
            ]
        );
    }

    /// Berlin falls back on 2026-10-25 (03:00 → 02:00): 02:30 happens twice; the job
    /// runs once, the first time (02:30 CEST, 00:30 UTC).
    #[test]
    fn berlin_fall_back_runs_once() {
        assert_eq!(
            runs("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 3),
            [
                "2026-10-25T00:30:00Z",
                "2026-10-26T01:30:00Z",
                "2026-10-27T01:30:00Z"
            ]
        );
    }

    /// New York springs forward on 2026-03-08 (02:00 → 03:00): once, at 03:00 EDT.
    #[test]
    fn new_york_spring_forward_runs_once() {
        assert_eq!(
            runs("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 3),
            [
                "2026-03-08T07:00:00Z",
                "2026-03-09T06:30:00Z",
                "2026-03-10T06:30:00Z"
            ]
        );
    }

    /// New York falls back on 2026-11-01 (02:00 → 01:00): 01:30 happens twice; once.
    #[test]
    fn new_york_fall_back_runs_once() {
        assert_eq!(
            runs("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 3),
            [
                "2026-11-01T05:30:00Z",
                "2026-11-02T06:30:00Z",
                "2026-11-03T06:30:00Z"
            ]
        );
    }

    /// Jobs that repeat within the day keep their real interval across the change: an
    /// hourly job runs in both 02:00 hours of Berlin's fall-back day, and on the
    /// spring-forward day, when 02:00 does not exist, at 03:00 only once.
    #[test]
    fn hourly_jobs_across_the_changes() {
        assert_eq!(
            runs("0 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", 3),
            [
                "2026-10-25T00:00:00Z",
                "2026-10-25T01:00:00Z",
                "2026-10-25T02:00:00Z"
            ]
        );
        assert_eq!(
            runs("0 * * * *", "Europe/Berlin", "2026-03-28T23:30:00Z", 3),
            [
                "2026-03-29T00:00:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-29T02:00:00Z"
            ]
        );
    }

    /// Upcoming runs are shown in the job's zone.
    #[test]
    fn upcoming_runs_are_in_the_zone() {
        let s = Schedule::parse("0 9 * * *", "Europe/Berlin").unwrap();
        let up = s.upcoming(at("2026-06-01T00:00:00Z"), 3);
        assert_eq!(up.len(), 3);
        assert_eq!(
            up[0].strftime("%Y-%m-%d %H:%M %Z").to_string(),
            "2026-06-01 09:00 CEST"
        );
    }
}
