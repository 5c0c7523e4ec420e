//! DST table: exact fire instants around spring-forward and fall-back in
//! America/New_York, Europe/Paris, Australia/Sydney and Australia/Lord_Howe
//! (whose clocks move by 30 minutes).
//!
//! Rules (Debian cron): a fixed local time skipped by the gap fires once at
//! the end of the gap; a fixed local time repeated at fall-back fires once, on
//! its first pass; wildcard minute/hour schedules fire by elapsed time, in
//! order, never twice for one instant.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

use cairn_core::schedule::Schedule;
use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;

fn fires(expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let zone: Tz = zone.parse().unwrap();
    let from = DateTime::parse_from_rfc3339(from).unwrap().to_utc();
    Schedule::cron(expr, zone)
        .unwrap()
        .fire_times(from)
        .take(n)
        .map(|t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .collect()
}

/// (expression, zone, from, expected fire instants)
const TABLE: &[(&str, &str, &str, &[&str])] = &[
    // New York: 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z); 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z).
    (
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00Z",
        &["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
    ),
    (
        "0,30 1-3 * * *",
        "America/New_York",
        "2026-03-08T05:00:00Z",
        &[
            "2026-03-08T06:00:00Z",
            "2026-03-08T06:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:30:00Z",
        ],
    ),
    (
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00:00Z",
        &["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
    ),
    (
        "0 * * * *",
        "America/New_York",
        "2026-11-01T04:30:00Z",
        &[
            "2026-11-01T05:00:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T07:00:00Z",
        ],
    ),
    (
        "*/30 * * * *",
        "America/New_York",
        "2026-03-08T06:00:00Z",
        &[
            "2026-03-08T06:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:30:00Z",
        ],
    ),
    (
        "*/15 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00Z",
        &["2026-03-09T06:00:00Z"],
    ),
    (
        "*/15 1 * * *",
        "America/New_York",
        "2026-11-01T04:00:00Z",
        &[
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:15:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T05:45:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T06:15:00Z",
            "2026-11-01T06:30:00Z",
            "2026-11-01T06:45:00Z",
            "2026-11-02T06:00:00Z",
        ],
    ),
    // Paris: 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z); 2026-10-25 03:00 CEST -> 02:00 CET (01:00Z).
    (
        "30 2 * * *",
        "Europe/Paris",
        "2026-03-28T12:00:00Z",
        &["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],
    ),
    (
        "30 2 * * *",
        "Europe/Paris",
        "2026-10-24T12:00:00Z",
        &["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
    ),
    (
        "0 * * * *",
        "Europe/Paris",
        "2026-10-24T23:30:00Z",
        &[
            "2026-10-25T00:00:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00Z",
        ],
    ),
    (
        "0 */2 * * *",
        "Europe/Paris",
        "2026-03-28T22:30:00Z",
        &[
            "2026-03-28T23:00:00Z",
            "2026-03-29T02:00:00Z",
            "2026-03-29T04:00:00Z",
        ],
    ),
    // Sydney: 2026-04-05 03:00 AEDT -> 02:00 AEST (2026-04-04 16:00Z);
    //         2026-10-04 02:00 AEST -> 03:00 AEDT (2026-10-03 16:00Z).
    (
        "30 2 * * *",
        "Australia/Sydney",
        "2026-04-04T00:00:00Z",
        &["2026-04-04T15:30:00Z", "2026-04-05T16:30:00Z"],
    ),
    (
        "30 2 * * *",
        "Australia/Sydney",
        "2026-10-03T00:00:00Z",
        &["2026-10-03T16:00:00Z", "2026-10-04T15:30:00Z"],
    ),
    (
        "0 * * * *",
        "Australia/Sydney",
        "2026-04-04T14:30:00Z",
        &[
            "2026-04-04T15:00:00Z",
            "2026-04-04T16:00:00Z",
            "2026-04-04T17:00:00Z",
        ],
    ),
    // Lord Howe: 2026-04-05 02:00 +11 -> 01:30 +10:30 (2026-04-04 15:00Z);
    //            2026-10-04 02:00 +10:30 -> 02:30 +11 (2026-10-03 15:30Z).
    (
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T00:00:00Z",
        &["2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"],
    ),
    (
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00:00Z",
        &["2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"],
    ),
    (
        "*/20 * * * *",
        "Australia/Lord_Howe",
        "2026-04-04T14:30:00Z",
        &[
            "2026-04-04T14:40:00Z",
            "2026-04-04T15:10:00Z",
            "2026-04-04T15:30:00Z",
            "2026-04-04T15:50:00Z",
        ],
    ),
    (
        "*/20 * * * *",
        "Australia/Lord_Howe",
        "2026-10-03T15:00:00Z",
        &[
            "2026-10-03T15:10:00Z",
            "2026-10-03T15:40:00Z",
            "2026-10-03T16:00:00Z",
        ],
    ),
    (
        "* 9 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00:00Z",
        &["2026-10-03T22:00:00Z", "2026-10-03T22:01:00Z"],
    ),
];

#[test]
fn dst_table() {
    for (expr, zone, from, expected) in TABLE {
        assert_eq!(
            fires(expr, zone, from, expected.len()),
            *expected,
            "{expr} in {zone} from {from}"
        );
    }
}

#[test]
fn one_shots_resolve_like_cron_across_dst() {
    let cases = [
        // Skipped local time: first instant after the gap.
        (
            "2026-03-08T02:30",
            "America/New_York",
            "2026-03-08T07:00:00Z",
        ),
        ("2026-03-29T02:15", "Europe/Paris", "2026-03-29T01:00:00Z"),
        (
            "2026-10-04T02:30",
            "Australia/Sydney",
            "2026-10-03T16:00:00Z",
        ),
        (
            "2026-10-04T02:10",
            "Australia/Lord_Howe",
            "2026-10-03T15:30:00Z",
        ),
        // Repeated local time: the first occurrence.
        (
            "2026-11-01T01:30",
            "America/New_York",
            "2026-11-01T05:30:00Z",
        ),
        ("2026-10-25T02:30", "Europe/Paris", "2026-10-25T00:30:00Z"),
        (
            "2026-04-05T02:30",
            "Australia/Sydney",
            "2026-04-04T15:30:00Z",
        ),
        (
            "2026-04-05T01:45",
            "Australia/Lord_Howe",
            "2026-04-04T14:45:00Z",
        ),
    ];
    let now = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    for (text, zone, expected) in cases {
        let s = Schedule::parse(text, zone.parse().unwrap(), now).unwrap();
        assert_eq!(s.normalized(), expected, "{text} in {zone}");
    }
}

#[test]
fn fixed_times_never_fire_twice_and_never_skip_a_day() {
    // Every local time of day, across both transitions of each zone: exactly one fire per day.
    for zone in [
        "America/New_York",
        "Europe/Paris",
        "Australia/Sydney",
        "Australia/Lord_Howe",
    ] {
        let tz: Tz = zone.parse().unwrap();
        for (from, days) in [("2026-03-01T00:00:00Z", 60), ("2026-09-20T00:00:00Z", 60)] {
            for minute_of_day in (0..1440).step_by(10) {
                let expr = format!("{} {} * * *", minute_of_day % 60, minute_of_day / 60);
                let from = DateTime::parse_from_rfc3339(from).unwrap().to_utc();
                let s = Schedule::cron(&expr, tz).unwrap();
                let times: Vec<_> = s.fire_times(from).take(days).collect();
                for pair in times.windows(2) {
                    let (a, b) = (pair[0].with_timezone(&tz), pair[1].with_timezone(&tz));
                    assert_eq!(
                        (b.date_naive() - a.date_naive()).num_days(),
                        1,
                        "{expr} in {zone}: {a} -> {b} skips or repeats a day"
                    );
                }
            }
        }
    }
}
