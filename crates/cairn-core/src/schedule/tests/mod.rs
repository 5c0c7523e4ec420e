//! Unit tests of the schedule module as a whole: parsing every form, normalized
//! round trips, intervals, one-shots and errors (phrases people write to set
//! reminders: `phrases.rs`). The DST table, property tests and the cronsim
//! differential test live in `crates/cairn-core/tests/`.

use chrono::{DateTime, Utc};
use chrono_tz::America::New_York;
use chrono_tz::Europe::Paris;
use chrono_tz::Tz;

use super::*;

mod phrases;

fn t(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

fn rfc(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn next(expr: &str, zone: Tz, now: &str, n: usize) -> Vec<String> {
    let s = Schedule::parse(expr, zone, t(now)).unwrap();
    s.fire_times(t(now)).take(n).map(rfc).collect()
}

fn parsed(expr: &str, zone: Tz, now: &str) -> Schedule {
    Schedule::parse(expr, zone, t(now)).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

fn err(expr: &str, zone: Tz, now: &str) -> String {
    Schedule::parse(expr, zone, t(now)).unwrap_err().to_string()
}

const NOW: &str = "2026-03-09T10:17:00Z"; // a Monday; 06:17 in New York, 11:17 in Paris

#[test]
fn weekday_mornings_in_new_york_cross_the_dst_change() {
    assert_eq!(
        next("0 9 * * 1-5", New_York, "2026-03-06T00:00:00Z", 5),
        [
            "2026-03-06T14:00:00Z",
            "2026-03-09T13:00:00Z",
            "2026-03-10T13:00:00Z",
            "2026-03-11T13:00:00Z",
            "2026-03-12T13:00:00Z"
        ]
    );
}

#[test]
fn cron_kinds_normalize_and_describe() {
    let s = parsed("0 9 * * MON-FRI", New_York, NOW);
    assert_eq!(s.kind(), ScheduleKind::Cron);
    assert_eq!(s.normalized(), "0 9 * * 1-5");
    assert_eq!(
        s.describe(),
        "at 09:00, Monday through Friday (America/New_York)"
    );
    assert_eq!(s.to_string(), "0 9 * * 1-5");
    assert_eq!(parsed("@daily", Paris, NOW).normalized(), "0 0 * * *");
    assert_eq!(
        parsed("*/5 * * * * *", Paris, NOW).normalized(),
        "*/5 * * * * *"
    );
}

#[test]
fn six_and_seven_field_cron() {
    assert_eq!(
        next("*/20 * * * * *", chrono_tz::UTC, "2026-03-09T10:17:05Z", 3),
        [
            "2026-03-09T10:17:20Z",
            "2026-03-09T10:17:40Z",
            "2026-03-09T10:18:00Z"
        ]
    );
    assert_eq!(
        next("0 0 12 1 1 * 2027,2029", chrono_tz::UTC, NOW, 3),
        ["2027-01-01T12:00:00Z", "2029-01-01T12:00:00Z"],
        "a year field runs out"
    );
}

#[test]
fn special_day_forms() {
    let utc = chrono_tz::UTC;
    assert_eq!(
        next("0 0 L * *", utc, NOW, 2),
        ["2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"]
    );
    assert_eq!(
        next("0 0 * * 5L", utc, NOW, 2),
        ["2026-03-27T00:00:00Z", "2026-04-24T00:00:00Z"]
    );
    assert_eq!(
        next("0 0 * * 1#2", utc, NOW, 2),
        ["2026-04-13T00:00:00Z", "2026-05-11T00:00:00Z"]
    );
    assert_eq!(
        next("0 0 15W * *", utc, NOW, 2),
        ["2026-03-16T00:00:00Z", "2026-04-15T00:00:00Z"]
    );
    assert_eq!(next("0 0 LW * *", utc, NOW, 1), ["2026-03-31T00:00:00Z"]);
    // Sunday is 0 and 7.
    assert_eq!(
        next("0 0 * * 7", utc, NOW, 1),
        next("0 0 * * 0", utc, NOW, 1)
    );
    assert_eq!(next("0 0 * * SUN", utc, NOW, 1), ["2026-03-15T00:00:00Z"]);
}

#[test]
fn debian_day_rule_or_unless_a_field_starts_with_star() {
    let utc = chrono_tz::UTC;
    // Both restricted: the 13th OR any Friday.
    assert_eq!(
        next("0 0 13 * 5", utc, NOW, 3),
        [
            "2026-03-13T00:00:00Z",
            "2026-03-20T00:00:00Z",
            "2026-03-27T00:00:00Z"
        ]
    );
    // `*/2` starts with `*`: odd days AND Fridays (croner would OR them).
    assert_eq!(
        next("0 0 */2 * 5", utc, NOW, 3),
        [
            "2026-03-13T00:00:00Z",
            "2026-03-27T00:00:00Z",
            "2026-04-03T00:00:00Z"
        ]
    );
}

#[test]
fn intervals_are_anchored_at_creation() {
    let s = parsed("every 2h", New_York, NOW);
    assert_eq!(s.kind(), ScheduleKind::Interval);
    assert_eq!(s.normalized(), "every 7200s from 2026-03-09T10:17:00Z");
    assert_eq!(s.describe(), "every 2 hours (from 2026-03-09T10:17:00Z)");
    let times: Vec<String> = s.fire_times(t(NOW)).take(3).map(rfc).collect();
    assert_eq!(
        times,
        [
            "2026-03-09T12:17:00Z",
            "2026-03-09T14:17:00Z",
            "2026-03-09T16:17:00Z"
        ]
    );
    // Restarted later, the phase is kept.
    let again = Schedule::from_normalized(&s.normalized(), New_York).unwrap();
    assert_eq!(again, s);
    assert_eq!(
        again
            .next_after(t("2026-03-20T15:00:00Z"))
            .map(rfc)
            .unwrap(),
        "2026-03-20T16:17:00Z"
    );
    assert_eq!(
        again
            .next_after(t("2026-03-20T16:17:00Z"))
            .map(rfc)
            .unwrap(),
        "2026-03-20T18:17:00Z"
    );
    // Before the anchor, the first fire is anchor + period.
    assert_eq!(
        again
            .next_after(t("2020-01-01T00:00:00Z"))
            .map(rfc)
            .unwrap(),
        "2026-03-09T12:17:00Z"
    );
    // Sub-second "now" is truncated so the stored anchor is exact.
    let s = parsed("every 30s", Paris, "2026-03-09T10:17:00.900Z");
    assert_eq!(s.normalized(), "every 30s from 2026-03-09T10:17:00Z");
}

#[test]
fn interval_phrases() {
    let secs = |expr: &str| match parsed(expr, Paris, NOW).rule() {
        Rule::Interval { every, .. } => every.as_secs(),
        other => panic!("{expr}: {other:?}"),
    };
    assert_eq!(secs("every 30s"), 30);
    assert_eq!(secs("every 5m"), 300);
    assert_eq!(secs("every 2h"), 7200);
    assert_eq!(secs("every 2 hours"), 7200);
    assert_eq!(secs("every 90 minutes"), 5400);
    assert_eq!(secs("Every 1h30m"), 5400);
    assert_eq!(secs("every hour"), 3600);
    assert_eq!(secs("every minute"), 60);
    assert_eq!(secs("every 2 days"), 172_800);
    assert_eq!(secs("every 2 weeks"), 1_209_600);
    assert_eq!(secs("toutes les 5 minutes"), 300);
    assert_eq!(secs("toutes les heures"), 3600);
    assert_eq!(secs("chaque minute"), 60);
    assert_eq!(secs("tous les 2 jours"), 172_800);
    assert_eq!(secs("every 2h from 2026-01-01T00:00:00Z"), 7200);
    assert_eq!(
        parsed("every 90 minutes", Paris, NOW)
            .next_after(t(NOW))
            .map(rfc)
            .unwrap(),
        "2026-03-09T11:47:00Z"
    );
}

fn cron_of(expr: &str) -> String {
    let s = parsed(expr, New_York, NOW);
    assert_eq!(s.kind(), ScheduleKind::Cron, "{expr}");
    s.normalized()
}

#[test]
fn calendar_phrases_become_cron() {
    let cases = [
        ("hourly", "0 * * * *"),
        ("daily", "0 0 * * *"),
        ("every day", "0 0 * * *"),
        ("every day at 9am", "0 9 * * *"),
        ("daily at 09:30", "30 9 * * *"),
        ("every weekday at 9", "0 9 * * 1-5"),
        ("weekdays at 18:00", "0 18 * * 1-5"),
        ("on weekdays at 6:45pm", "45 18 * * 1-5"),
        ("weekends at 10am", "0 10 * * 0,6"),
        ("every weekend at 10am", "0 10 * * 0,6"),
        ("every monday at 10am", "0 10 * * 1"),
        ("mondays at 10am", "0 10 * * 1"),
        ("every mon,wed,fri at 7:15", "15 7 * * 1,3,5"),
        ("every monday and friday at noon", "0 12 * * 1,5"),
        ("every month on the 1st at 8am", "0 8 1 * *"),
        ("monthly on the 15th at 17:00", "0 17 15 * *"),
        ("every month on the last day at 23:00", "0 23 L * *"),
        ("weekly on sunday at 20:00", "0 20 * * 0"),
        ("every week", "0 0 * * 0"),
        ("yearly", "0 0 1 1 *"),
        ("at 9am every day", "0 9 * * *"),
        ("at 9am on weekdays", "0 9 * * 1-5"),
        ("every day at 9:30:15", "15 30 9 * * *"),
        ("tous les jours à 9h", "0 9 * * *"),
        ("chaque jour à 7h30", "30 7 * * *"),
        ("chaque lundi à 10h30", "30 10 * * 1"),
        ("tous les lundis à 10h", "0 10 * * 1"),
        ("en semaine à 9h", "0 9 * * 1-5"),
        ("du lundi au vendredi à 8h", "0 8 * * 1-5"),
        ("du vendredi au lundi à 8h", "0 8 * * 0,1,5,6"),
        ("le week-end à 10h", "0 10 * * 0,6"),
        ("tous les mois le 1er à 8h", "0 8 1 * *"),
        ("chaque mois le dernier jour à minuit", "0 0 L * *"),
        ("à 9h tous les jours", "0 9 * * *"),
    ];
    for (expr, cron) in cases {
        assert_eq!(cron_of(expr), cron, "{expr}");
    }
    assert_eq!(cron_of("every weekday at 9am"), cron_of("0 9 * * MON-FRI"));
}

fn once_at(expr: &str, zone: Tz, now: &str) -> String {
    let s = parsed(expr, zone, now);
    assert_eq!(s.kind(), ScheduleKind::Once, "{expr}");
    s.normalized()
}

#[test]
fn one_shots() {
    let ny = New_York;
    assert_eq!(once_at("in 5m", ny, NOW), "2026-03-09T10:22:00Z");
    assert_eq!(once_at("in 90m", ny, NOW), "2026-03-09T11:47:00Z");
    assert_eq!(once_at("in 1h30m", ny, NOW), "2026-03-09T11:47:00Z");
    assert_eq!(
        once_at("in 2 hours and 15 minutes", ny, NOW),
        "2026-03-09T12:32:00Z"
    );
    assert_eq!(once_at("dans 30 minutes", ny, NOW), "2026-03-09T10:47:00Z");
    assert_eq!(once_at("in an hour", ny, NOW), "2026-03-09T11:17:00Z");
    // 06:17 in New York on Monday 9 March.
    assert_eq!(once_at("tomorrow at 9am", ny, NOW), "2026-03-10T13:00:00Z");
    assert_eq!(once_at("today at 17:00", ny, NOW), "2026-03-09T21:00:00Z");
    assert_eq!(once_at("demain à 8h", ny, NOW), "2026-03-10T12:00:00Z");
    assert_eq!(
        once_at("next friday at noon", ny, NOW),
        "2026-03-13T16:00:00Z"
    );
    assert_eq!(
        once_at("next monday at noon", ny, NOW),
        "2026-03-16T16:00:00Z"
    );
    assert_eq!(once_at("monday at noon", ny, NOW), "2026-03-09T16:00:00Z");
    assert_eq!(once_at("on monday at 6am", ny, NOW), "2026-03-16T10:00:00Z");
    assert_eq!(
        once_at("vendredi prochain à midi", ny, NOW),
        "2026-03-13T16:00:00Z"
    );
    assert_eq!(once_at("at 14:30", ny, NOW), "2026-03-09T18:30:00Z");
    assert_eq!(
        once_at("at 6:00", ny, NOW),
        "2026-03-10T10:00:00Z",
        "06:00 has passed"
    );
    assert_eq!(once_at("à 14h30", ny, NOW), "2026-03-09T18:30:00Z");
    assert_eq!(once_at("at 9am tomorrow", ny, NOW), "2026-03-10T13:00:00Z");
    assert_eq!(
        once_at("2026-03-10T09:00:00Z", ny, NOW),
        "2026-03-10T09:00:00Z"
    );
    assert_eq!(
        once_at("2026-03-10T09:00:00+01:00", ny, NOW),
        "2026-03-10T08:00:00Z"
    );
    assert_eq!(once_at("2026-03-10T09:00", ny, NOW), "2026-03-10T13:00:00Z");
    assert_eq!(
        once_at("2026-03-10 09:00", Paris, NOW),
        "2026-03-10T08:00:00Z"
    );
    // DST: a skipped local time fires at the end of the gap; a repeated one on its first pass.
    assert_eq!(
        once_at("2026-03-08T02:30", ny, "2026-03-01T00:00:00Z"),
        "2026-03-08T07:00:00Z"
    );
    assert_eq!(
        once_at("tomorrow at 2:30", ny, "2026-03-07T12:00:00Z"),
        "2026-03-08T07:00:00Z"
    );
    assert_eq!(
        once_at("2026-11-01T01:30", ny, "2026-10-01T00:00:00Z"),
        "2026-11-01T05:30:00Z"
    );
    let s = parsed("2026-03-10T09:00", ny, NOW);
    assert_eq!(s.describe(), "once at 2026-03-10 09:00 (America/New_York)");
    assert_eq!(s.next_after(t(NOW)), Some(t("2026-03-10T13:00:00Z")));
    assert_eq!(s.next_after(t("2026-03-10T13:00:00Z")), None);
    assert_eq!(s.fire_times(t(NOW)).count(), 1);
}

#[test]
fn past_one_shots_are_errors() {
    let e = err("today at 5am", New_York, NOW);
    assert!(e.contains("is not in the future"), "{e}");
    assert!(err("2026-03-09T10:17:00Z", New_York, NOW).contains("not in the future"));
    assert!(err("2020-01-01T00:00:00Z", New_York, NOW).contains("2020-01-01T00:00:00Z"));
    // A stored one-shot in the past still loads; it just has no next fire.
    let s = Schedule::from_normalized("2020-01-01T00:00:00Z", New_York).unwrap();
    assert_eq!(s.next_after(t(NOW)), None);
}

#[test]
fn normalized_text_round_trips() {
    let exprs = [
        "0 9 * * MON-FRI",
        "*/15 * * * *",
        "5/10 * 1-10/3 JAN-JUN,SEP ?",
        "0 0 L,LW,15W * 5L,1#2",
        "0 30 2 * * * 2027-2030/2",
        "@weekly",
        "every weekday at 9am",
        "every 90 minutes",
        "every 2h from 2026-01-01T00:00:00Z",
        "in 20m",
        "tomorrow at 9am",
        "2026-12-25T08:00",
        "every other day at 9am",
        "every 3 days at 02:30 from 2026-03-01",
        "at 9am and 5pm on weekdays",
        "le 1er de chaque mois à 9h",
    ];
    for zone in [New_York, Paris, chrono_tz::Australia::Lord_Howe] {
        for expr in exprs {
            let s = parsed(expr, zone, NOW);
            let text = s.normalized();
            let back = Schedule::from_normalized(&text, zone).unwrap();
            assert_eq!(back, s, "{expr} -> {text}");
            assert_eq!(back.normalized(), text);
            // Normalized text is also accepted by parse (cron and intervals keep meaning).
            if s.kind() != ScheduleKind::Once {
                assert_eq!(parsed(&text, zone, NOW), s, "{text}");
            }
        }
    }
}

#[test]
fn errors_name_the_token_and_expectation() {
    let z = Paris;
    assert_eq!(
        err("every 5 blorps", z, NOW),
        "\"every 5 blorps\": unknown unit \"blorps\"; expected s, m, h, d"
    );
    assert!(err("0 25 * * *", z, NOW).contains("hour 25 out of range 0-23"));
    assert!(err("every day at 25:00", z, NOW).contains("hour 25 out of range 0-23"));
    assert_eq!(
        err("every day at 9am please", z, NOW),
        "\"every day at 9am please\": understood \"every day at 9am\"; could not understand \"please\" (at word 5); expected the end of the phrase"
    );
    assert!(err("in 5m now", z, NOW).contains("could not understand \"now\" (at word 3)"));
    assert!(err("every", z, NOW).contains("ends too early"));
    assert!(
        err("every blorp", z, NOW).contains("understood \"every\"; could not understand \"blorp\"")
    );
    assert!(err("tomorrow", z, NOW).contains("ends too early; expected a time"));
    assert!(
        err("next week at 9", z, NOW).contains("could not understand \"week at 9\" (at word 2)")
    );
    assert!(err("every 0s", z, NOW).contains("interval is zero"));
    assert!(err("every 1000000 days", z, NOW).contains("too large"));
    assert!(err("soon", z, NOW).contains("not a cron expression or a known phrase"));
    assert!(err("at 9am every 5m", z, NOW).contains("could not understand \"every 5m\""));
    assert!(err("every month on the 32nd", z, NOW).contains("day-of-month 32 out of range 1-31"));
    assert!(err("2026-02-30T09:00", z, NOW).contains("ISO 8601"));
    assert_eq!(Schedule::parse(" ", z, t(NOW)), Err(ScheduleError::Empty));
    assert!(matches!(
        Schedule::parse("0 0 * * 9", z, t(NOW)),
        Err(ScheduleError::OutOfRange {
            field: Field::DayOfWeek,
            ..
        })
    ));
}

#[test]
fn zones_are_parsed_by_name() {
    assert_eq!(parse_zone("America/New_York").unwrap(), New_York);
    assert!(parse_zone("Nowhere/Land").is_err());
}

#[test]
fn extreme_instants_do_not_panic() {
    let s = parsed("0 9 * * 1-5", New_York, NOW);
    assert_eq!(s.next_after(DateTime::<Utc>::MAX_UTC), None);
    assert!(s.next_after(DateTime::<Utc>::MIN_UTC).is_some());
    let i = parsed("every 100 weeks", New_York, NOW);
    assert_eq!(i.next_after(DateTime::<Utc>::MAX_UTC), None);
    let late = t("9999-12-30T00:00:00Z");
    assert_eq!(s.next_after(late), None);
    // Found by fuzzing: a one-shot past year 9999 could not round-trip.
    let e = err("in 90m", New_York, "9999-12-31T23:00:00Z");
    assert!(e.contains("years 1 to 9999 are supported"), "{e}");
    assert!(Schedule::once(t("9999-12-31T23:59:59Z"), New_York).is_ok());
    assert!(Schedule::once(DateTime::<Utc>::MAX_UTC, New_York).is_err());
    let every = parsed("every 2h", New_York, "9999-12-31T20:00:00Z");
    assert_eq!(every.fire_times(t("9999-12-31T20:00:00Z")).count(), 1);
    assert!(Schedule::parse("every 2h", New_York, DateTime::<Utc>::MAX_UTC).is_err());
}
