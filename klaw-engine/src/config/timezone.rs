//! The user's time zone when engine.json names none: `TZ`, else the system's zone
//! (read from `/etc/localtime`'s link), else UTC.

use super::Env;

/// `TZ` (a name `current_time` knows), else the zone `/etc/localtime` names, else the
/// system's zone as jiff finds it, else `UTC`; always spelled as the IANA name.
pub(super) fn system_timezone(env: Env<'_>) -> String {
    if let Some(tz) = env("TZ") {
        let tz = tz.trim_start_matches(':');
        if let Ok(zone) = klaw_tools::tools::utilities::time_zone(tz) {
            return zone.iana_name().unwrap_or(tz).to_owned();
        }
    }
    localtime_link_name()
        .or_else(|| {
            jiff::tz::TimeZone::try_system()
                .ok()
                .and_then(|z| z.iana_name().map(str::to_owned))
        })
        .unwrap_or_else(|| "UTC".into())
}

/// The zone `/etc/localtime` names when it is a link into a zoneinfo directory (its
/// usual form: `/usr/share/zoneinfo/Europe/Moscow`), as spelled in the time zones
/// compiled into the engine; `None` for anything else.
///
/// The same reading of the link as `jiff::tz::TimeZone::try_system`, without its
/// database of the system's zones, which lists the whole zoneinfo directory (some 600
/// files in 22 directories) on first use: every start of the engine paid for that scan.
fn localtime_link_name() -> Option<String> {
    const LOCALTIME: &str = "/etc/localtime";
    let target = std::fs::read_link(LOCALTIME).ok()?;
    // A link to nothing is not a zone (`try_system` falls back to UTC then too).
    std::fs::metadata(LOCALTIME).ok()?;
    let target = target.to_str()?;
    let name = &target[target.rfind("zoneinfo/")? + "zoneinfo/".len()..];
    let zone = jiff::tz::TimeZoneDatabase::bundled().get(name).ok()?;
    zone.iana_name().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{env, resolve_defaults};

    #[test]
    fn a_bad_timezone_variable_is_named() {
        let e = env(&[("HOME", "/h"), ("KLAW_TIMEZONE", "Europe/Moskow")]);
        let err = resolve_defaults(&e).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "environment variable KLAW_TIMEZONE=\"Europe/Moskow\": unknown time zone"
            ),
            "{err}"
        );
        let e = env(&[("HOME", "/h"), ("KLAW_TIMEZONE", "europe/moscow")]);
        let c = resolve_defaults(&e).unwrap();
        assert_eq!(c.timezone, "Europe/Moscow", "canonical spelling");
    }

    #[test]
    fn tz_is_read_in_its_canonical_spelling_and_a_bad_one_is_not_used() {
        assert_eq!(
            system_timezone(&env(&[("TZ", ":europe/moscow")])),
            "Europe/Moscow"
        );
        let fallback = system_timezone(&env(&[]));
        assert_eq!(system_timezone(&env(&[("TZ", "Mars/Olympus")])), fallback);
    }
}
