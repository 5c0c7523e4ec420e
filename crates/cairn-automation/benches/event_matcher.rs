//! Matching one chat message (ASCII, and non-ASCII) against 10,000 event
//! patterns, building the matcher from them, and validating them one by one.
//!
//! `cargo bench -p cairn-automation --bench event_matcher`; the target and
//! the latest figures are in docs/performance.md.
#![expect(clippy::unwrap_used, reason = "benchmark set-up unwraps freely")]

use std::hint::black_box;

use cairn_automation::routines::event_matcher::{EventMatcher, EventPattern, validate_pattern};
use criterion::{Criterion, criterion_group, criterion_main};
use uuid::Uuid;

const WORDS: &[&str] = &[
    "deploy", "release", "incident", "outage", "invoice", "standup", "backup", "rollback", "pager",
    "budget", "meeting", "reminder", "todo", "grocery", "flight", "hotel", "review", "merge",
    "ticket", "alert",
];
const CHANNELS: &[&str] = &["slack", "telegram", "discord", "cli"];

/// A realistic mix: literal words, `deploy\s+\w+`-style commands,
/// alternations, case-insensitive and anchored ones, a quarter with a channel filter.
fn patterns(n: usize) -> Vec<EventPattern> {
    (0..n)
        .map(|i| {
            let w = WORDS[i % WORDS.len()];
            let v = WORDS[(i / WORDS.len()) % WORDS.len()];
            let pattern = match i % 8 {
                0 => format!("{w}-{i}"),
                1 => format!(r"{w}\s+\w+{i}"),
                2 => format!("(?:{w}|{v}) #{i}"),
                3 => format!("(?i){w} {v} {i}"),
                4 => format!(r"^!{w}{i}\b"),
                5 => format!(r"{v}\s+(?:to|on)\s+env{i}"),
                6 => format!("ticket [A-Z]+-{i}"),
                _ => format!(r"\b{w}{i}\b|{v}:{i}"),
            };
            EventPattern {
                id: Uuid::from_u128(i as u128),
                name: format!("routine-{i}"),
                channel: (i % 4 == 0).then(|| CHANNELS[i % CHANNELS.len()].to_string()),
                pattern,
            }
        })
        .collect()
}

const MESSAGES: &[&str] = &[
    "hey, can you deploy the billing service to staging after lunch? thanks!",
    "Incident update: the payments API is back, rollback finished at 14:02",
    "rappel : réunion demain à 9h pour la revue du budget ✅",
    "ticket OPS-4242 is blocking the release, please review",
];

fn bench(c: &mut Criterion) {
    let all = patterns(10_000);
    let mut group = c.benchmark_group("event_matcher");
    group.sample_size(10);
    group.bench_function("build 10000 patterns", |b| {
        b.iter(|| EventMatcher::build(black_box(all.clone())).unwrap())
    });
    // The share of the build spent compiling each pattern alone (the check
    // that names a bad pattern's routine).
    group.bench_function("validate 10000 patterns one by one", |b| {
        b.iter(|| {
            for p in &all {
                validate_pattern(&p.name, black_box(&p.pattern)).unwrap();
            }
        })
    });
    group.finish();

    let matcher = EventMatcher::build(all).unwrap();
    let mut group = c.benchmark_group("event_matcher");
    for (i, message) in MESSAGES.iter().enumerate() {
        let ascii = if message.is_ascii() {
            "ascii"
        } else {
            "non-ascii"
        };
        group.bench_function(
            format!("match message {i} ({ascii}) vs 10000 patterns"),
            |b| b.iter(|| matcher.matches(black_box("slack"), black_box(message))),
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
