//! `next_after` of typical schedules, plus parsing for scale.
//!
//! `cargo bench -p cairn-core --bench schedule`; the target and the latest
//! figures are in docs/performance.md.
#![expect(clippy::unwrap_used, reason = "benchmark set-up unwraps freely")]

use std::hint::black_box;

use cairn_core::schedule::Schedule;
use chrono::{DateTime, Utc};
use criterion::{Criterion, criterion_group, criterion_main};

/// Instants spread over a year (one every ~9 days, at varied times), so
/// the benchmark sees ordinary days and DST-change days alike.
fn instants() -> Vec<DateTime<Utc>> {
    (0..40)
        .map(|i| DateTime::from_timestamp(1_767_225_600 + i * 790_123, 0).unwrap())
        .collect()
}

fn next_after(c: &mut Criterion) {
    let now = DateTime::from_timestamp(1_767_225_600, 0).unwrap();
    let cases = [
        (
            "cron weekdays 9:00 New_York",
            "0 9 * * 1-5",
            "America/New_York",
        ),
        ("cron */15 Paris", "*/15 * * * *", "Europe/Paris"),
        ("cron hourly UTC", "0 * * * *", "UTC"),
        (
            "cron 02:30 daily New_York",
            "30 2 * * *",
            "America/New_York",
        ),
        ("cron last Friday Sydney", "0 18 * * 5L", "Australia/Sydney"),
        (
            "cron 1st+15th Lord_Howe",
            "0 8 1,15 * *",
            "Australia/Lord_Howe",
        ),
        ("cron seconds */10", "*/10 * * * * *", "Europe/Paris"),
        ("cron yearly Feb 29", "0 0 29 2 *", "America/New_York"),
        (
            "human every weekday at 9am",
            "every weekday at 9am",
            "America/New_York",
        ),
        (
            "interval every 90 minutes",
            "every 90 minutes",
            "Europe/Paris",
        ),
        (
            "human every day at 9am and 5pm",
            "every day at 9am and 5pm",
            "America/New_York",
        ),
        (
            "human every other day at 9am",
            "every other day at 9am",
            "Europe/Paris",
        ),
    ];
    let instants = instants();
    let mut group = c.benchmark_group("next_after");
    for (name, expr, zone) in cases {
        let s = Schedule::parse(expr, zone.parse().unwrap(), now).unwrap();
        let mut i = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % instants.len();
                black_box(s.next_after(black_box(instants[i])))
            })
        });
    }
    group.finish();
}

fn parse(c: &mut Criterion) {
    let now = DateTime::from_timestamp(1_767_225_600, 0).unwrap();
    let zone = chrono_tz::Europe::Paris;
    let mut group = c.benchmark_group("parse");
    for expr in [
        "0 9 * * MON-FRI",
        "every weekday at 9am",
        "in 2 hours and 15 minutes",
        "tous les jours à 9h et 17h",
    ] {
        group.bench_function(expr, |b| {
            b.iter(|| Schedule::parse(black_box(expr), zone, now))
        });
    }
    group.finish();
}

criterion_group!(benches, next_after, parse);
criterion_main!(benches);
