//! The demo's clock: the current time in a time zone, and a time of day converted between
//! two. Zones are a built-in table of common IANA names with their standard offsets and
//! daylight-saving rules (EU, North America, south-east Australia, New Zealand), enough for
//! a demo without shipping the tz database.

use chrono::{DateTime, Datelike, Duration, FixedOffset, NaiveDate, TimeZone, Utc, Weekday};
use serde_json::{json, Value};

/// When a zone moves its clocks.
#[derive(Clone, Copy)]
enum Dst {
    None,
    /// Last Sunday of March to last Sunday of October, 01:00 UTC.
    Eu,
    /// Second Sunday of March to first Sunday of November, 02:00 local.
    Us,
    /// First Sunday of October to first Sunday of April, 02:00 standard time.
    Au,
    /// Last Sunday of September to first Sunday of April, 02:00 standard time.
    Nz,
}

/// (IANA name, standard offset in minutes east of UTC, rule).
const ZONES: &[(&str, i32, Dst)] = &[
    ("UTC", 0, Dst::None),
    ("Etc/UTC", 0, Dst::None),
    ("GMT", 0, Dst::None),
    ("Europe/London", 0, Dst::Eu),
    ("Europe/Dublin", 0, Dst::Eu),
    ("Europe/Lisbon", 0, Dst::Eu),
    ("Europe/Paris", 60, Dst::Eu),
    ("Europe/Berlin", 60, Dst::Eu),
    ("Europe/Madrid", 60, Dst::Eu),
    ("Europe/Rome", 60, Dst::Eu),
    ("Europe/Amsterdam", 60, Dst::Eu),
    ("Europe/Brussels", 60, Dst::Eu),
    ("Europe/Vienna", 60, Dst::Eu),
    ("Europe/Zurich", 60, Dst::Eu),
    ("Europe/Stockholm", 60, Dst::Eu),
    ("Europe/Oslo", 60, Dst::Eu),
    ("Europe/Copenhagen", 60, Dst::Eu),
    ("Europe/Warsaw", 60, Dst::Eu),
    ("Europe/Prague", 60, Dst::Eu),
    ("Europe/Athens", 120, Dst::Eu),
    ("Europe/Helsinki", 120, Dst::Eu),
    ("Europe/Kyiv", 120, Dst::Eu),
    ("Europe/Bucharest", 120, Dst::Eu),
    ("Europe/Istanbul", 180, Dst::None),
    ("Europe/Moscow", 180, Dst::None),
    ("America/New_York", -300, Dst::Us),
    ("America/Toronto", -300, Dst::Us),
    ("America/Chicago", -360, Dst::Us),
    ("America/Denver", -420, Dst::Us),
    ("America/Phoenix", -420, Dst::None),
    ("America/Los_Angeles", -480, Dst::Us),
    ("America/Vancouver", -480, Dst::Us),
    ("America/Anchorage", -540, Dst::Us),
    ("America/Mexico_City", -360, Dst::None),
    ("America/Bogota", -300, Dst::None),
    ("America/Lima", -300, Dst::None),
    ("America/Sao_Paulo", -180, Dst::None),
    ("America/Argentina/Buenos_Aires", -180, Dst::None),
    ("Pacific/Honolulu", -600, Dst::None),
    ("Africa/Lagos", 60, Dst::None),
    ("Africa/Johannesburg", 120, Dst::None),
    ("Africa/Nairobi", 180, Dst::None),
    ("Asia/Dubai", 240, Dst::None),
    ("Asia/Karachi", 300, Dst::None),
    ("Asia/Kolkata", 330, Dst::None),
    ("Asia/Dhaka", 360, Dst::None),
    ("Asia/Bangkok", 420, Dst::None),
    ("Asia/Jakarta", 420, Dst::None),
    ("Asia/Singapore", 480, Dst::None),
    ("Asia/Shanghai", 480, Dst::None),
    ("Asia/Hong_Kong", 480, Dst::None),
    ("Asia/Taipei", 480, Dst::None),
    ("Asia/Manila", 480, Dst::None),
    ("Asia/Seoul", 540, Dst::None),
    ("Asia/Tokyo", 540, Dst::None),
    ("Australia/Perth", 480, Dst::None),
    ("Australia/Brisbane", 600, Dst::None),
    ("Australia/Adelaide", 570, Dst::Au),
    ("Australia/Sydney", 600, Dst::Au),
    ("Australia/Melbourne", 600, Dst::Au),
    ("Pacific/Auckland", 720, Dst::Nz),
];

/// The `n`th (1-based) `weekday` of a month, or the last one with `n = 0`.
fn nth_weekday(year: i32, month: u32, weekday: Weekday, n: u8) -> NaiveDate {
    if n > 0 {
        return NaiveDate::from_weekday_of_month_opt(year, month, weekday, n)
            .expect("every month has a first and second Sunday");
    }
    let (y, m) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    let mut day =
        NaiveDate::from_ymd_opt(y, m, 1).expect("a first of the month") - Duration::days(1);
    while day.weekday() != weekday {
        day -= Duration::days(1);
    }
    day
}

/// The instant at `hour`:00 of `day` in a zone `offset` minutes east of UTC.
fn at(day: NaiveDate, hour: u32, offset: i32) -> DateTime<Utc> {
    let local = day.and_hms_opt(hour, 0, 0).expect("a valid hour");
    Utc.from_utc_datetime(&local) - Duration::minutes(offset.into())
}

/// Whether daylight saving time is in force at `t` in a zone of standard offset `std`.
fn is_dst(rule: Dst, std: i32, t: DateTime<Utc>) -> bool {
    let y = t.year();
    let sun = Weekday::Sun;
    match rule {
        Dst::None => false,
        Dst::Eu => {
            at(nth_weekday(y, 3, sun, 0), 1, 0) <= t && t < at(nth_weekday(y, 10, sun, 0), 1, 0)
        }
        Dst::Us => {
            at(nth_weekday(y, 3, sun, 2), 2, std) <= t
                && t < at(nth_weekday(y, 11, sun, 1), 2, std + 60)
        }
        Dst::Au => {
            at(nth_weekday(y, 10, sun, 1), 2, std) <= t || t < at(nth_weekday(y, 4, sun, 1), 2, std)
        }
        Dst::Nz => {
            at(nth_weekday(y, 9, sun, 0), 2, std) <= t || t < at(nth_weekday(y, 4, sun, 1), 2, std)
        }
    }
}

/// A zone by its IANA name (case-insensitive), or a message naming some it knows.
fn zone(name: &str) -> Result<(&'static str, i32, Dst), String> {
    ZONES
        .iter()
        .find(|(n, _, _)| n.eq_ignore_ascii_case(name.trim()))
        .copied()
        .ok_or_else(|| {
            format!(
                "unknown time zone {name:?}: use an IANA name such as Europe/London, America/New_York, Asia/Tokyo, Australia/Sydney or UTC (the demo knows {} zones)",
                ZONES.len()
            )
        })
}

/// The time at `t` in zone `name`, as `get_current_time` answers it.
fn describe(name: &str, t: DateTime<Utc>) -> Result<Value, String> {
    let (name, std, rule) = zone(name)?;
    let dst = is_dst(rule, std, t);
    let offset = FixedOffset::east_opt((std + if dst { 60 } else { 0 }) * 60)
        .expect("an offset within a day");
    let local = t.with_timezone(&offset);
    Ok(json!({
        "timezone": name,
        "datetime": local.to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
        "day_of_week": local.format("%A").to_string(),
        "is_dst": dst,
    }))
}

/// `get_current_time {timezone}`.
pub(crate) fn current_time(timezone: &str, now: DateTime<Utc>) -> Result<Value, String> {
    describe(timezone, now)
}

/// `convert_time {source_timezone, time, target_timezone}`: `time` (HH:MM) today in the
/// source zone, and the same instant in the target zone.
pub(crate) fn convert(
    source: &str,
    time: &str,
    target: &str,
    now: DateTime<Utc>,
) -> Result<Value, String> {
    let (_, std, rule) = zone(source)?;
    let parsed = chrono::NaiveTime::parse_from_str(time.trim(), "%H:%M").map_err(|_| {
        format!("time {time:?}: write the time of day as HH:MM, 24-hour, e.g. 09:30")
    })?;
    let offset = |t| std + if is_dst(rule, std, t) { 60 } else { 0 };
    let today = (now + Duration::minutes(offset(now).into())).date_naive();
    let local = today.and_time(parsed);
    let instant = Utc.from_utc_datetime(&local) - Duration::minutes(offset(now).into());
    let (from, to) = (describe(source, instant)?, describe(target, instant)?);
    let minutes = |v: &Value| {
        let dt = DateTime::parse_from_rfc3339(v["datetime"].as_str().unwrap_or_default());
        dt.map_or(0, |d| d.offset().local_minus_utc() / 60)
    };
    let diff = f64::from(minutes(&to) - minutes(&from)) / 60.0;
    Ok(json!({"source": from, "target": to, "time_difference": format!("{diff:+.1}h")}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn offsets_follow_daylight_saving_on_both_hemispheres() {
        let cases = [
            (
                "2026-07-01T12:00:00Z",
                "Europe/Paris",
                "2026-07-01T14:00:00+02:00",
                true,
            ),
            (
                "2026-12-05T12:00:00Z",
                "Europe/Paris",
                "2026-12-05T13:00:00+01:00",
                false,
            ),
            (
                "2026-07-01T12:00:00Z",
                "America/New_York",
                "2026-07-01T08:00:00-04:00",
                true,
            ),
            (
                "2026-12-05T12:00:00Z",
                "america/new_york",
                "2026-12-05T07:00:00-05:00",
                false,
            ),
            (
                "2026-12-05T12:00:00Z",
                "Australia/Sydney",
                "2026-12-05T23:00:00+11:00",
                true,
            ),
            (
                "2026-07-01T12:00:00Z",
                "Australia/Sydney",
                "2026-07-01T22:00:00+10:00",
                false,
            ),
            (
                "2026-12-05T12:00:00Z",
                "Asia/Tokyo",
                "2026-12-05T21:00:00+09:00",
                false,
            ),
            (
                "2026-12-05T12:00:00Z",
                "Asia/Kolkata",
                "2026-12-05T17:30:00+05:30",
                false,
            ),
            // The EU switch is at 01:00 UTC on the last Sunday of March (29 March 2026).
            (
                "2026-03-29T00:59:00Z",
                "Europe/London",
                "2026-03-29T00:59:00+00:00",
                false,
            ),
            (
                "2026-03-29T01:00:00Z",
                "Europe/London",
                "2026-03-29T02:00:00+01:00",
                true,
            ),
        ];
        for (now, zone, local, dst) in cases {
            let v = current_time(zone, utc(now)).unwrap();
            assert_eq!(
                (
                    v["datetime"].as_str().unwrap(),
                    v["is_dst"].as_bool().unwrap()
                ),
                (local, dst),
                "{zone} at {now}"
            );
        }
        assert!(current_time("Mars/Olympus", utc("2026-01-01T00:00:00Z"))
            .unwrap_err()
            .contains("IANA"));
    }

    #[test]
    fn a_time_of_day_converts_between_zones() {
        let v = convert(
            "Europe/London",
            "09:30",
            "Asia/Tokyo",
            utc("2026-12-05T08:00:00Z"),
        )
        .unwrap();
        assert_eq!(v["source"]["datetime"], "2026-12-05T09:30:00+00:00");
        assert_eq!(v["target"]["datetime"], "2026-12-05T18:30:00+09:00");
        assert_eq!(v["time_difference"], "+9.0h");
        assert!(convert("UTC", "9h", "UTC", Utc::now())
            .unwrap_err()
            .contains("HH:MM"));
    }
}
