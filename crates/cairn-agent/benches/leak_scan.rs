//! Leak scanning (issue 47): a 100 KB request (an LLM request's text, a
//! tool call's arguments) against 100 watched secrets, each with its
//! encodings (URL-encoded, base64 at three alignments), plus the key
//! shapes; clean and with one secret in it (scan and redact), and building
//! the automaton; and the key shapes alone over a short notification's text.
//!
//! `cargo bench -p cairn-agent --bench leak_scan` (a plain timing binary:
//! one JSON object on stdout). The target (< 1 ms) and the latest figures
//! are in docs/performance.md.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cairn_agent::safety::leak::{LeakScanner, WatchedSecret};
use secrecy::SecretString;

/// A small deterministic generator (no dependency, same data every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn secret(rng: &mut Lcg, len: usize) -> String {
    (0..len)
        .map(|_| char::from(ALPHABET[(rng.next() % ALPHABET.len() as u64) as usize]))
        .collect()
}

/// About `bytes` of prose-like JSON text, as a request carries.
fn request(rng: &mut Lcg, bytes: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "agent",
        "fetched",
        "https://example.com/path?q=1",
        "and",
        "found",
        "{\"role\":",
        "\"user\"",
        "content",
        "Authorization:",
        "tool",
        "result",
        "sk-learn",
        "token",
        "42",
    ];
    let mut out = String::with_capacity(bytes + 64);
    while out.len() < bytes {
        out.push_str(WORDS[(rng.next() % WORDS.len() as u64) as usize]);
        out.push(' ');
    }
    out
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    let samples = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    median(samples)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let mut rng = Lcg(47);
    let secrets: Vec<WatchedSecret> = (0..100)
        .map(|i| {
            let value = secret(&mut rng, 16 + i % 48);
            WatchedSecret::new(format!("S{i}"), SecretString::from(value))
        })
        .collect();
    let build = time(20, || {
        black_box(LeakScanner::new(black_box(&secrets)));
    });
    let scanner = LeakScanner::new(&secrets);
    let clean = request(&mut rng, 100 * 1024);
    let mut dirty = clean.clone();
    dirty.insert_str(dirty.len() / 2, &format!(" {} ", secret(&mut Lcg(47), 16)));
    assert!(scanner.scan(&clean).is_empty(), "the clean text has a hit");
    assert_eq!(
        scanner.scan(&dirty).len(),
        1,
        "the planted secret is not found"
    );
    let scan_clean = time(200, || {
        black_box(scanner.scan(black_box(&clean)));
    });
    let scan_dirty = time(200, || {
        black_box(scanner.scan(black_box(&dirty)));
    });
    let shapes = time(200, || {
        black_box(cairn_agent::safety::leak::shapes::find(black_box(&clean)));
    });
    // A routine's notification, as every run's end checks one: short, and
    // holding no key shape's first letters.
    let short = "Routine nightly-backup: ok\nbackup 0001 finished in 4.2 s, 17 files";
    assert!(cairn_agent::safety::leak::shapes::find(short).is_empty());
    const SHORT_CALLS: u32 = 1000;
    let shapes_short = time(200, || {
        for _ in 0..SHORT_CALLS {
            black_box(cairn_agent::safety::leak::shapes::find(black_box(short)));
        }
    }) / SHORT_CALLS;
    let redact_dirty = time(200, || {
        black_box(scanner.redact(black_box(&dirty)));
    });
    let report = serde_json::json!({
        "secrets": secrets.len(),
        "request_bytes": clean.len(),
        "build_us": micros(build),
        "scan_clean_us": micros(scan_clean),
        "scan_one_hit_us": micros(scan_dirty),
        "redact_one_hit_us": micros(redact_dirty),
        "shapes_alone_us": micros(shapes),
        "shapes_short_clean_ns": shapes_short.as_nanos(),
        "automaton_bytes": scanner.memory_usage(),
        "target_us": 1000,
        "met": scan_clean < Duration::from_millis(1) && scan_dirty < Duration::from_millis(1),
    });
    println!("{report}");
}
