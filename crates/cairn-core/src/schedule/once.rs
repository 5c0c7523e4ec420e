//! One-shot instants: ISO 8601 times and local dates/times resolved in a zone.
//!
//! A local time is resolved the way cron resolves a fixed time: skipped by a
//! spring-forward gap, it becomes the first instant after the gap; repeated at
//! fall-back, it is its first occurrence.

use chrono::{DateTime, NaiveDateTime, Utc};
use chrono_tz::Tz;

use super::error::ScheduleError;
use super::zone::{MAX_INSTANT, MIN_INSTANT, offset_at, resolve_local};

const EXPECTED_ISO: &str = "an ISO 8601 time such as 2026-03-09T09:00, 2026-03-09 09:00:00, 2026-03-09T09:00:00Z or 2026-03-09T09:00:00+01:00";

fn bad_iso(text: &str) -> ScheduleError {
    ScheduleError::Unexpected {
        expr: text.to_string(),
        token: text.to_string(),
        expected: EXPECTED_ISO.to_string(),
    }
}

fn to_utc(text: &str, t: i64) -> Result<DateTime<Utc>, ScheduleError> {
    if !(MIN_INSTANT..=MAX_INSTANT).contains(&t) {
        return Err(ScheduleError::TooLarge {
            expr: text.to_string(),
            what: "the date",
            limit: "years 1 to 9999 are supported",
        });
    }
    DateTime::from_timestamp(t, 0).ok_or_else(|| bad_iso(text))
}

/// Parses an ISO 8601 date-time. With an offset or `Z` it is that instant;
/// without, it is a wall-clock time in `zone` (not UTC). Sub-seconds are dropped.
pub(crate) fn parse_iso(text: &str, zone: Tz) -> Result<DateTime<Utc>, ScheduleError> {
    let text = text.trim();
    // Accept a lowercase `t`/`z` and a space separator, as RFC 3339 allows.
    let mut upper = text.to_ascii_uppercase();
    if upper.as_bytes().get(10) == Some(&b' ') {
        upper.replace_range(10..11, "T");
    }
    let with_offset = match upper.strip_suffix('Z') {
        Some(rest) => format!("{rest}+00:00"),
        None => upper.clone(),
    };
    for format in ["%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M%:z"] {
        if let Ok(dt) = DateTime::parse_from_str(&with_offset, format) {
            return to_utc(text, dt.timestamp());
        }
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(&upper, format) {
            let local = naive.and_utc().timestamp();
            return to_utc(text, resolve_local(zone, local));
        }
    }
    Err(bad_iso(text))
}

/// Local date (days since 1970-01-01) of an instant in `zone`.
pub(crate) fn local_day(zone: Tz, t: DateTime<Utc>) -> i64 {
    let s = t.timestamp();
    (s + offset_at(zone, s)).div_euclid(86_400)
}

/// The instant of a local date and second of day in `zone`, resolved like a fixed cron time.
pub(crate) fn at_local(
    expr: &str,
    zone: Tz,
    day: i64,
    seconds_of_day: u32,
) -> Result<DateTime<Utc>, ScheduleError> {
    let local = day * 86_400 + i64::from(seconds_of_day);
    to_utc(expr, resolve_local(zone, local))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iso(text: &str, zone: Tz) -> String {
        parse_iso(text, zone).unwrap().to_rfc3339()
    }

    #[test]
    fn offsets_and_zones() {
        let ny = chrono_tz::America::New_York;
        assert_eq!(iso("2026-03-09T09:00:00Z", ny), "2026-03-09T09:00:00+00:00");
        assert_eq!(iso("2026-03-09t09:00:00z", ny), "2026-03-09T09:00:00+00:00");
        assert_eq!(
            iso("2026-03-09T09:00:00+01:00", ny),
            "2026-03-09T08:00:00+00:00"
        );
        assert_eq!(
            iso("2026-03-09T09:00+01:00", ny),
            "2026-03-09T08:00:00+00:00"
        );
        assert_eq!(
            iso("2026-03-09T09:00:00.750Z", ny),
            "2026-03-09T09:00:00+00:00"
        );
        // No offset: read in the schedule's zone, not UTC.
        assert_eq!(iso("2026-03-09T09:00", ny), "2026-03-09T13:00:00+00:00");
        assert_eq!(iso("2026-03-09 09:00:00", ny), "2026-03-09T13:00:00+00:00");
        assert_eq!(iso("2026-01-09T09:00", ny), "2026-01-09T14:00:00+00:00");
        // Skipped: first instant after the gap. Repeated: first occurrence.
        assert_eq!(iso("2026-03-08T02:30", ny), "2026-03-08T07:00:00+00:00");
        assert_eq!(iso("2026-11-01T01:30", ny), "2026-11-01T05:30:00+00:00");
    }

    #[test]
    fn rejects_malformed_times() {
        let ny = chrono_tz::America::New_York;
        for bad in [
            "2026-03-09",
            "2026-13-09T09:00",
            "2026-02-30T09:00",
            "2026-03-09T25:00",
            "2026-03-09T09:00:00Zjunk",
            "2026-03-09T09:00 tomorrow",
        ] {
            let err = parse_iso(bad, ny).unwrap_err().to_string();
            assert!(err.contains("expected an ISO 8601 time"), "{bad}: {err}");
        }
    }
}
