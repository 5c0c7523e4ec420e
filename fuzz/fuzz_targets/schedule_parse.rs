//! Fuzzes schedule parsing (cron, human phrases, ISO one-shots, normalized
//! text) and evaluation: nothing may panic, a parsed schedule must round-trip
//! through its normalized text, and its fire times must strictly increase.
//!
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run schedule_parse -- -dict=schedule.dict -max_total_time=300`

#![no_main]

use cairn_core::schedule::{Schedule, ScheduleKind};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use libfuzzer_sys::fuzz_target;

const ZONES: [Tz; 8] = [
    chrono_tz::UTC,
    chrono_tz::America::New_York,
    chrono_tz::Europe::Paris,
    chrono_tz::Australia::Lord_Howe,
    chrono_tz::Pacific::Chatham,
    chrono_tz::America::Santiago,
    chrono_tz::Asia::Kolkata,
    chrono_tz::Pacific::Kiritimati,
];

/// 0001-01-01 .. 9999-12-31, the instants `now` may take.
const MIN: i64 = -62_135_596_800;
const MAX: i64 = 253_402_300_799;

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let zone = ZONES[usize::from(data[0]) % ZONES.len()];
    let raw = i64::from_le_bytes(data[1..9].try_into().unwrap_or([0; 8]));
    // Mostly near the present, sometimes anywhere in the supported range.
    let seconds = if raw & 1 == 0 {
        1_700_000_000 + raw.rem_euclid(1_000_000_000)
    } else {
        MIN + raw.rem_euclid(MAX - MIN)
    };
    let Some(now) = DateTime::<Utc>::from_timestamp(seconds, 0) else {
        return;
    };
    let text = String::from_utf8_lossy(&data[9..]);

    let _ = Schedule::from_normalized(&text, zone);
    let _ = Schedule::cron(&text, zone);
    let Ok(schedule) = Schedule::parse(&text, zone, now) else {
        return;
    };
    let normalized = schedule.normalized();
    let _ = schedule.describe();
    let back = Schedule::from_normalized(&normalized, zone)
        .unwrap_or_else(|e| panic!("{text:?} -> {normalized:?} does not parse back: {e}"));
    assert_eq!(
        back, schedule,
        "{text:?} -> {normalized:?} round-trips to something else"
    );
    if schedule.kind() == ScheduleKind::Once {
        assert!(
            schedule.next_after(now).is_some_and(|t| t > now),
            "{text:?}: one-shot not after now"
        );
    }
    let mut last = now;
    for t in schedule.fire_times(now).take(8) {
        assert!(t > last, "{text:?} in {zone}: {t} not after {last}");
        last = t;
    }
});
