//! Helpers shared by the schedule integration tests: a seeded RNG, DST
//! transition lookup, and a brute-force oracle of the documented semantics.

#![allow(
    dead_code,
    reason = "not in every build: each test binary uses part of the harness"
)]
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

use cairn_core::schedule::{Rule, Schedule};
use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

/// SplitMix64: tiny, seeded, reproducible.
pub struct Rng(u64);

impl Rng {
    /// A generator with a fixed seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Offset from UTC in seconds at an instant.
pub fn offset(zone: Tz, t: i64) -> i64 {
    let utc = DateTime::from_timestamp(t, 0).unwrap().naive_utc();
    i64::from(zone.offset_from_utc_datetime(&utc).fix().local_minus_utc())
}

/// The instants (Unix seconds) at which `zone` changes offset in the given years.
pub fn transitions(zone: Tz, from_year: i32, to_year: i32) -> Vec<i64> {
    let start = Utc
        .with_ymd_and_hms(from_year, 1, 1, 0, 0, 0)
        .unwrap()
        .timestamp();
    let end = Utc
        .with_ymd_and_hms(to_year, 12, 31, 0, 0, 0)
        .unwrap()
        .timestamp();
    let mut out = Vec::new();
    let mut t = start;
    while t < end {
        let (a, b) = (t, t + 86_400);
        if offset(zone, a) != offset(zone, b) {
            let (mut lo, mut hi) = (a, b);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if offset(zone, mid) == offset(zone, a) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            out.push(hi);
        }
        t = b;
    }
    out
}

fn local(zone: Tz, t: i64) -> NaiveDateTime {
    DateTime::from_timestamp(t + offset(zone, t), 0)
        .unwrap()
        .naive_utc()
}

/// Whether the local wall-clock time of instant `t` occurs twice (fall-back).
pub fn is_ambiguous(zone: Tz, t: i64) -> bool {
    matches!(
        zone.from_local_datetime(&local(zone, t)),
        LocalResult::Ambiguous(..)
    )
}

/// The instant of a local time under the fixed-time rule, via chrono's own
/// resolution: earliest when repeated, the first existing minute when skipped.
fn resolve(zone: Tz, m: NaiveDateTime) -> Option<i64> {
    match zone.from_local_datetime(&m) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.timestamp()),
        LocalResult::None => {
            let minute = m.and_utc().timestamp() / 60 * 60;
            (1..=180).find_map(|k| {
                let probe = DateTime::from_timestamp(minute + 60 * k, 0)?.naive_utc();
                zone.from_local_datetime(&probe)
                    .earliest()
                    .map(|t| t.timestamp())
            })
        }
    }
}

/// The next fire strictly after `after`, found by scanning second by second
/// (minute by minute for 5-field cron) over at most `window` seconds:
/// an oracle independent of the bitset evaluator.
pub fn brute_next(schedule: &Schedule, after: DateTime<Utc>, window: i64) -> Option<DateTime<Utc>> {
    let Rule::Cron(cron) = schedule.rule() else {
        return schedule.next_after(after);
    };
    let zone = schedule.zone();
    let step = if schedule.normalized().split_whitespace().count() == 5 {
        60
    } else {
        1
    };
    let from = after.timestamp();
    if cron.is_fixed_time() {
        let start = local(zone, from).and_utc().timestamp();
        let mut m = start - start.rem_euclid(step);
        while m <= start + window {
            m += step;
            let naive = DateTime::from_timestamp(m, 0)?.naive_utc();
            if cron.matches(naive) {
                let t = resolve(zone, naive)?;
                if t > from {
                    return DateTime::from_timestamp(t, 0);
                }
            }
        }
    } else {
        let mut t = from - from.rem_euclid(step);
        while t <= from + window {
            t += step;
            if t > from && cron.matches(local(zone, t)) {
                return DateTime::from_timestamp(t, 0);
            }
        }
    }
    None
}
