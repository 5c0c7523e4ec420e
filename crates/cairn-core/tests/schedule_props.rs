//! Property tests of schedules: the next fire is strictly after `from`, fire
//! times strictly increase, every fire time matches the expression, the
//! evaluator agrees with a brute-force scan, normalized text round-trips, and
//! no input makes the parsers panic. Properties of what parsed also check
//! that enough samples did ([`check_parsed`]), so they cannot pass vacuously.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

mod schedule_support;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use cairn_core::schedule::{Rule, Schedule, ScheduleKind};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use schedule_support::{brute_next, offset, transitions};

/// Zones with DST of every shape: 1h at night, 30 and 45 minutes, at midnight, none.
const ZONES: [&str; 10] = [
    "UTC",
    "America/New_York",
    "Europe/Paris",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/Santiago", // changes at midnight
    "America/Havana",   // changes at midnight
    "Asia/Beirut",      // changes at midnight
    "Asia/Kolkata",
    "Pacific/Apia",
];

fn near_transitions(zone: Tz) -> Vec<i64> {
    static CACHE: OnceLock<Mutex<HashMap<String, Vec<i64>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().unwrap();
    cache
        .entry(zone.name().to_string())
        .or_insert_with(|| transitions(zone, 2024, 2030))
        .clone()
}

fn join(values: Vec<u32>) -> String {
    values
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn field(min: u32, max: u32) -> impl Strategy<Value = String> {
    let span = max - min + 1;
    prop_oneof![
        3 => Just("*".to_string()),
        2 => (min..=max).prop_map(|v| v.to_string()),
        2 => (min..=max, min..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
        2 => (1..=span).prop_map(|s| format!("*/{s}")),
        1 => (min..=max, 1..=span).prop_map(|(a, s)| format!("{a}/{s}")),
        1 => (min..=max, min..=max, 1..=span)
            .prop_map(|(a, b, s)| format!("{}-{}/{s}", a.min(b), a.max(b))),
        2 => prop::collection::vec(min..=max, 2..4).prop_map(join),
    ]
}

fn dom() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => field(1, 31),
        1 => Just("L".to_string()),
        1 => Just("LW".to_string()),
        1 => (1..=31u32).prop_map(|d| format!("{d}W")),
        1 => Just("?".to_string()),
        1 => (1..=28u32).prop_map(|d| format!("{d},L")),
    ]
}

fn dow() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => field(0, 7),
        1 => (0..=7u32).prop_map(|d| format!("{d}L")),
        1 => (0..=7u32, 1..=5u32).prop_map(|(d, n)| format!("{d}#{n}")),
        1 => Just("MON-FRI".to_string()),
        1 => Just("?".to_string()),
    ]
}

prop_compose! {
    fn cron_expr()(
        second in prop::option::weighted(0.25, field(0, 59)),
        minute in field(0, 59),
        hour in field(0, 23),
        dom in dom(),
        month in prop_oneof![3 => Just("*".to_string()), 1 => field(1, 12)],
        dow in dow(),
        year in prop::option::weighted(0.05, (2024..2034u32, 0..6u32)),
    ) -> String {
        let mut fields = vec![minute, hour, dom, month, dow];
        if let Some(second) = second {
            fields.insert(0, second);
        }
        if let Some((start, len)) = year {
            if fields.len() == 5 {
                fields.insert(0, "0".to_string());
            }
            fields.push(format!("{start}-{}", start + len));
        }
        fields.join(" ")
    }
}

prop_compose! {
    /// A zone and a starting instant, often within days of a DST change.
    fn zone_and_start()(
        zone in 0..ZONES.len(),
        near in any::<bool>(),
        pick in any::<prop::sample::Index>(),
        delta in -3 * 86_400i64..86_400,
        anywhere in 1_704_067_200i64..1_893_456_000, // 2024..2030
    ) -> (Tz, DateTime<Utc>) {
        let tz: Tz = ZONES[zone].parse().unwrap();
        let list = near_transitions(tz);
        let t = if near && !list.is_empty() { list[pick.index(list.len())] + delta } else { anywhere };
        (tz, DateTime::from_timestamp(t, 0).unwrap())
    }
}

/// Whether `t` is a fire time of `s`: its local time matches, or it is the end
/// of a DST gap that swallowed a matching fixed local time.
fn is_fire_time(s: &Schedule, t: DateTime<Utc>) -> bool {
    let Rule::Cron(cron) = s.rule() else {
        return true;
    };
    let zone = s.zone();
    if cron.matches(t.with_timezone(&zone).naive_local()) {
        return true;
    }
    let (before, after) = (offset(zone, t.timestamp() - 1), offset(zone, t.timestamp()));
    if !cron.is_fixed_time() || after <= before {
        return false;
    }
    // Local times in [local(t - 1s) + 1s, local(t)) were skipped by the gap.
    let gap_start = t.timestamp() - 1 + before + 1;
    let gap_end = t.timestamp() + after;
    (gap_start..gap_end).any(|local| {
        DateTime::from_timestamp(local, 0).is_some_and(|l| cron.matches(l.naive_utc()))
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn intervals_fire_every_period_from_their_anchor(
        secs in 1u64..400_000,
        anchor in 1_704_067_200i64..1_893_456_000,
        offset_secs in -1_000_000i64..10_000_000,
    ) {
        let anchor = DateTime::from_timestamp(anchor, 0).unwrap();
        let s = Schedule::interval(std::time::Duration::from_secs(secs), anchor, chrono_tz::UTC).unwrap();
        let from = anchor + chrono::Duration::seconds(offset_secs);
        let times: Vec<_> = s.fire_times(from).take(4).collect();
        prop_assert!(times[0] > from && times[0] > anchor);
        prop_assert_eq!((times[0] - anchor).num_seconds() % secs as i64, 0);
        for pair in times.windows(2) {
            prop_assert_eq!((pair[1] - pair[0]).num_seconds(), secs as i64);
        }
        if from >= anchor {
            prop_assert!((times[0] - from).num_seconds() <= secs as i64);
        } else {
            prop_assert_eq!(times[0], anchor + chrono::Duration::seconds(secs as i64));
        }
        let back = Schedule::from_normalized(&s.normalized(), chrono_tz::UTC).unwrap();
        prop_assert_eq!(back, s);
    }

    /// Several times a day are one cron rule exactly when they form a grid
    /// (every listed minute of every listed hour); otherwise they are refused.
    #[test]
    fn several_times_a_day_fire_exactly_at_those_times(
        times in prop::collection::btree_set((0u32..24, prop::sample::select(vec![0u32, 15, 30, 45])), 1..5),
        day in 19_000i64..21_000,
    ) {
        let list: Vec<String> = times.iter().map(|(h, m)| format!("{h:02}:{m:02}")).collect();
        let text = format!("every day at {}", list.join(" and "));
        let hours: std::collections::BTreeSet<u32> = times.iter().map(|t| t.0).collect();
        let minutes: std::collections::BTreeSet<u32> = times.iter().map(|t| t.1).collect();
        let grid = hours.len() * minutes.len() == times.len();
        let midnight = DateTime::from_timestamp(day * 86_400, 0).unwrap();
        match Schedule::parse(&text, chrono_tz::UTC, midnight) {
            Ok(s) => {
                prop_assert!(grid, "{text} accepted though not a grid");
                let before = midnight - chrono::Duration::seconds(1);
                let fired: std::collections::BTreeSet<(u32, u32)> = s
                    .fire_times(before)
                    .take_while(|t| *t < midnight + chrono::Duration::days(1))
                    .map(|t| (chrono::Timelike::hour(&t), chrono::Timelike::minute(&t)))
                    .collect();
                prop_assert_eq!(&fired, &times, "{}", text);
            }
            Err(e) => {
                prop_assert!(!grid, "{text} refused: {e}");
                prop_assert!(e.to_string().contains("one schedule cannot fire at exactly"), "{e}");
            }
        }
    }

    /// `every N days at HH:MM` fires at that local time (or the end of a DST gap
    /// that swallowed it), N local days apart, first within a day of `now`.
    #[test]
    fn every_n_days_keeps_the_local_time(
        n in 2u32..10,
        hour in 0u32..24,
        minute in prop::sample::select(vec![0u32, 15, 30, 45]),
        (zone, now) in zone_and_start(),
    ) {
        use chrono::{Datelike, NaiveTime, TimeZone};
        let text = format!("every {n} days at {hour:02}:{minute:02}");
        let s = Schedule::parse(&text, zone, now).unwrap();
        let back = Schedule::from_normalized(&s.normalized(), zone).unwrap();
        prop_assert_eq!(&back, &s);
        let wanted = NaiveTime::from_hms_opt(hour, minute, 0).unwrap();
        let times: Vec<_> = s.fire_times(now).take(6).collect();
        prop_assert!(times[0] > now);
        prop_assert!(times[0] <= now + chrono::Duration::hours(50), "{text}: first fire {} too late", times[0]);
        let mut last_date = None;
        for t in &times {
            let local = t.with_timezone(&zone);
            let date = local.date_naive();
            if local.time() != wanted {
                // Only a spring-forward gap may move it, to the end of the gap.
                prop_assert!(
                    zone.from_local_datetime(&date.and_time(wanted)).earliest().is_none(),
                    "{text} in {zone}: fired at {local}"
                );
            }
            if let Some(prev) = last_date {
                let gap = date.num_days_from_ce() - chrono::NaiveDate::num_days_from_ce(&prev);
                prop_assert_eq!(gap, n as i32, "{} in {}", text, zone);
            }
            last_date = Some(date);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,60}", (zone, now) in zone_and_start()) {
        let _ = Schedule::parse(&text, zone, now);
        let _ = Schedule::from_normalized(&text, zone);
    }
}

/// Generated cron expressions that must parse: about 98% do.
const MIN_CRON_PARSED: u32 = CASES * 3 / 4;
/// Generated phrases that must parse: about 60% do (the rest is word salad).
const MIN_PHRASES_PARSED: u32 = CASES * 2 / 5;

/// Samples each counting property runs (as the `proptest!` block's cases).
const CASES: u32 = 768;

/// Runs `property` on [`CASES`] samples of `strategy`; `property` answers
/// whether the sample was one it checks (the text parsed). Fails when fewer
/// than `min_checked` were: a generator drifting into text the parser
/// refuses would otherwise leave the property checking nothing.
fn check_parsed<S: Strategy>(
    name: &str,
    strategy: S,
    min_checked: u32,
    property: impl Fn(S::Value) -> Result<bool, TestCaseError>,
) {
    let checked = std::cell::Cell::new(0u32);
    let mut runner = TestRunner::new(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&strategy, |value| {
        if property(value)? {
            checked.set(checked.get() + 1);
        }
        Ok(())
    });
    if let Err(error) = result {
        panic!("{name}: {error}");
    }
    let checked = checked.get();
    assert!(
        checked >= min_checked,
        "{name}: only {checked} of {CASES} samples parsed (at least {min_checked} expected); has the generator drifted?"
    );
}

#[test]
fn fire_times_are_after_from_increasing_and_matching() {
    check_parsed(
        "fire times",
        (cron_expr(), zone_and_start()),
        MIN_CRON_PARSED,
        |(expr, (zone, from))| {
            let Ok(s) = Schedule::cron(&expr, zone) else {
                return Ok(false);
            };
            let mut last = from;
            for t in s.fire_times(from).take(25) {
                prop_assert!(t > last, "{expr} in {zone}: {t} after {last}");
                prop_assert!(is_fire_time(&s, t), "{expr} in {zone}: {t} does not match");
                last = t;
            }
            Ok(true)
        },
    );
}

#[test]
fn evaluator_agrees_with_brute_force() {
    check_parsed(
        "brute force",
        (cron_expr(), zone_and_start()),
        MIN_CRON_PARSED,
        |(expr, (zone, from))| {
            let Ok(s) = Schedule::cron(&expr, zone) else {
                return Ok(false);
            };
            let minutes_only = s.normalized().split_whitespace().count() == 5;
            let window = if minutes_only { 3 * 86_400 } else { 4 * 3600 };
            let ours = s.next_after(from);
            match brute_next(&s, from, window) {
                Some(truth) => prop_assert_eq!(ours, Some(truth), "{} in {}", expr, zone),
                None => prop_assert!(
                    ours.is_none_or(|o| o.timestamp() > from.timestamp() + window - 2 * 3600),
                    "{expr} in {zone}: brute force found nothing before {ours:?}"
                ),
            }
            Ok(true)
        },
    );
}

#[test]
fn normalized_cron_round_trips() {
    check_parsed(
        "round trip",
        (cron_expr(), zone_and_start()),
        MIN_CRON_PARSED,
        |(expr, (zone, _))| {
            let Ok(s) = Schedule::cron(&expr, zone) else {
                return Ok(false);
            };
            let text = s.normalized();
            let back = Schedule::from_normalized(&text, zone).unwrap();
            prop_assert_eq!(&back, &s);
            prop_assert_eq!(back.normalized(), text);
            Ok(true)
        },
    );
}

#[test]
fn phrase_like_text_never_panics_and_parses_consistently() {
    check_parsed(
        "phrases",
        (phrase(), zone_and_start()),
        MIN_PHRASES_PARSED,
        |(text, (zone, now))| {
            let Ok(s) = Schedule::parse(&text, zone, now) else {
                return Ok(false);
            };
            let next = s.next_after(now);
            if s.kind() == ScheduleKind::Once {
                prop_assert!(
                    next.is_some_and(|t| t > now),
                    "{text}: one-shot not in the future"
                );
            }
            let back = Schedule::from_normalized(&s.normalized(), zone).unwrap();
            prop_assert_eq!(back, s, "{}", text);
            Ok(true)
        },
    );
}

/// Phrases as people write them (from templates the parser documents), or
/// words of its vocabulary in any order.
fn phrase() -> impl Strategy<Value = String> {
    let pick = |items: &'static [&'static str]| prop::sample::select(items.to_vec());
    const TIMES: &[&str] = &[
        "9am", "12pm", "17:00", "02:30", "noon", "midnight", "10h30", "9:15", "6pm",
    ];
    const DAYS: &[&str] = &[
        "today",
        "tomorrow",
        "next monday",
        "monday",
        "next fri",
        "2026-03-10",
    ];
    const EVERY: &[&str] = &[
        "every day",
        "daily",
        "weekdays",
        "every weekday",
        "weekends",
        "every monday",
        "sundays",
        "every other day",
        "every 2 days",
        "on the 1st of every month",
        "on the 15th of every month",
        "on the last day of every month",
        "monthly",
        "weekly",
    ];
    const DURATIONS: &[&str] = &[
        "5m",
        "1h30m",
        "30s",
        "90 minutes",
        "2 hours",
        "1 hour",
        "25 minutes",
    ];
    const FRENCH: &[&str] = &[
        "demain à 9h",
        "dans 1h30",
        "tous les jours à 9h",
        "chaque lundi à 10h30",
        "du lundi au vendredi à 8h",
        "le 1er de chaque mois à 9h",
    ];
    prop_oneof![
        2 => pick(DURATIONS).prop_map(|d| format!("in {d}")),
        2 => (pick(DAYS), pick(TIMES)).prop_map(|(d, t)| format!("{d} at {t}")),
        3 => (pick(EVERY), pick(TIMES)).prop_map(|(e, t)| format!("{e} at {t}")),
        1 => (1u32..120, pick(&["minutes", "hours", "days", "weeks"]))
            .prop_map(|(n, unit)| format!("every {n} {unit}")),
        1 => (pick(TIMES), pick(TIMES)).prop_map(|(a, b)| format!("every day at {a} and {b}")),
        1 => pick(FRENCH).prop_map(str::to_string),
        4 => prop::collection::vec(pick(VOCABULARY), 1..7).prop_map(|words| words.join(" ")),
    ]
}

const VOCABULARY: &[&str] = &[
    "every",
    "in",
    "at",
    "on",
    "the",
    "and",
    "from",
    "next",
    "today",
    "tomorrow",
    "daily",
    "hourly",
    "weekly",
    "monthly",
    "weekdays",
    "weekends",
    "day",
    "weekday",
    "month",
    "week",
    "hour",
    "minute",
    "monday",
    "fri",
    "sundays",
    "1st",
    "15th",
    "last",
    "5",
    "90",
    "0",
    "25",
    "2",
    "5m",
    "1h30m",
    "30s",
    "minutes",
    "hours",
    "blorps",
    "9am",
    "12pm",
    "17:00",
    "02:30",
    "noon",
    "midnight",
    "10h30",
    ",",
    "à",
    "dans",
    "demain",
    "toutes",
    "tous",
    "les",
    "jours",
    "chaque",
    "lundi",
    "vendredi",
    "prochain",
    "le",
    "mois",
    "1er",
    "en",
    "semaine",
    "du",
    "au",
    "week-end",
    "2026-03-08T02:30",
    "2030-01-01T00:00:00Z",
    "*",
    "*/5",
    "@daily",
    "other",
    "of",
    "each",
    "un",
    "jour",
    "sur",
    "deux",
    "de",
    "et",
    "dernier",
    "1h30",
    "h",
    "15",
    "9:15",
    "2026-03-10",
];
