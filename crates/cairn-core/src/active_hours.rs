//! A daily window of local time (`08:00-22:00`), for work that should only
//! happen while the person is awake, such as the heartbeat.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveTime, Utc};
use chrono_tz::Tz;

/// A daily window `start-end` in local time; `end` before `start` wraps past
/// midnight (`22:00-06:00`), and `start == end` is the whole day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveHours {
    /// First minute inside the window.
    pub start: NaiveTime,
    /// First minute after the window.
    pub end: NaiveTime,
}

/// Text that is not `HH:MM-HH:MM`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not a daily window; expected HH:MM-HH:MM such as \"08:00-22:00\"")]
pub struct BadActiveHours(pub String);

impl ActiveHours {
    /// Whether `local` (a wall-clock time of day) is inside the window.
    pub fn contains_time(&self, local: NaiveTime) -> bool {
        if self.start == self.end {
            true
        } else if self.start < self.end {
            self.start <= local && local < self.end
        } else {
            local >= self.start || local < self.end
        }
    }

    /// Whether the instant `at`, read in `zone`, is inside the window.
    pub fn contains(&self, at: DateTime<Utc>, zone: Tz) -> bool {
        self.contains_time(at.with_timezone(&zone).time())
    }
}

impl FromStr for ActiveHours {
    type Err = BadActiveHours;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadActiveHours(s.to_string());
        let (a, b) = s.split_once('-').ok_or_else(bad)?;
        let time = |t: &str| {
            let t = t.trim();
            // 24:00 is how people write "until midnight".
            if t == "24:00" {
                return Ok(NaiveTime::MIN);
            }
            NaiveTime::parse_from_str(t, "%H:%M").map_err(|_| bad())
        };
        Ok(ActiveHours {
            start: time(a)?,
            end: time(b)?,
        })
    }
}

impl fmt::Display for ActiveHours {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}",
            self.start.format("%H:%M"),
            self.end.format("%H:%M")
        )
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use chrono::TimeZone;

    fn t(h: u32, m: u32) -> NaiveTime {
        NaiveTime::from_hms_opt(h, m, 0).unwrap()
    }

    #[test]
    fn a_day_window_holds_its_start_not_its_end() {
        let w: ActiveHours = "08:00-22:00".parse().unwrap();
        assert!(!w.contains_time(t(7, 59)));
        assert!(w.contains_time(t(8, 0)));
        assert!(w.contains_time(t(21, 59)));
        assert!(!w.contains_time(t(22, 0)));
        assert_eq!(w.to_string(), "08:00-22:00");
    }

    #[test]
    fn a_night_window_wraps_past_midnight() {
        let w: ActiveHours = "22:00-06:00".parse().unwrap();
        assert!(w.contains_time(t(23, 0)));
        assert!(w.contains_time(t(2, 0)));
        assert!(!w.contains_time(t(12, 0)));
        let all: ActiveHours = "00:00-24:00".parse().unwrap();
        assert!(all.contains_time(t(12, 0)));
    }

    #[test]
    fn read_in_the_zone() {
        let w: ActiveHours = "08:00-22:00".parse().unwrap();
        // 06:30 UTC is 07:30 in Paris in winter: outside; 07:30 UTC is inside.
        let paris: Tz = "Europe/Paris".parse().unwrap();
        assert!(!w.contains(Utc.with_ymd_and_hms(2026, 1, 5, 6, 30, 0).unwrap(), paris));
        assert!(w.contains(Utc.with_ymd_and_hms(2026, 1, 5, 7, 30, 0).unwrap(), paris));
    }

    #[test]
    fn nonsense_is_refused() {
        for s in ["8-22", "08:00", "25:00-26:00", "08:00-22:00-23:00", ""] {
            assert!(s.parse::<ActiveHours>().is_err(), "{s}");
        }
    }
}
