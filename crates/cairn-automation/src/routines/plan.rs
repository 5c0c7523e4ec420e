//! Which slots a due timed routine runs now: the slot that came due, or,
//! after the daemon was down, the machine slept or the routine was paused,
//! what its `catch_up` policy says about the slots it missed.

use std::time::Duration;

use cairn_core::routine::CatchUp;
use cairn_core::schedule::Schedule;
use chrono::{DateTime, Utc};

/// Most due slots counted for one routine: an every-second routine left
/// alone for 11 days. Beyond it, the count says "at least".
const MAX_COUNTED: usize = 1_000_000;

/// Why slots were missed, for the note that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissedWhile {
    /// cairn was not running (or the machine slept).
    Down,
    /// The routine was paused (pausing is not disabling: its slots are owed).
    Paused,
}

impl MissedWhile {
    fn words(self) -> &'static str {
        match self {
            MissedWhile::Down => "while cairn was not running",
            MissedWhile::Paused => "while the routine was paused",
        }
    }
}

/// What to do with a routine whose slot has come due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotPlan {
    /// Slots to run now, oldest first.
    pub run: Vec<DateTime<Utc>>,
    /// With `catch_up: skip`, the latest missed slot, recorded as skipped.
    pub skip: Option<DateTime<Utc>>,
    /// Slots that came due and are not run (missed and left out).
    pub left_out: usize,
    /// The routine's next slot after this round (`None`: a one-shot, done).
    pub next: Option<DateTime<Utc>>,
}

impl SlotPlan {
    /// The slot whose compare-and-set claims the round: the stored one.
    pub fn is_empty(&self) -> bool {
        self.run.is_empty() && self.skip.is_none()
    }

    /// A line for the run's summary or skip reason, when slots were missed.
    pub fn note(&self, catch_up: CatchUp, why: MissedWhile) -> Option<String> {
        let missed = self.left_out + usize::from(self.skip.is_some());
        let paused = if why == MissedWhile::Paused {
            " while the routine was paused"
        } else {
            ""
        };
        match catch_up {
            _ if missed == 0 && self.run.len() <= 1 => None,
            CatchUp::Once => Some(format!(
                "caught up: {} slot(s) were missed{paused}; ran the latest once (catch_up: once)",
                self.left_out + 1
            )),
            CatchUp::Skip => Some(format!(
                "{missed} slot(s) were missed {}; none run (catch_up: skip)",
                why.words()
            )),
            CatchUp::All => Some(format!(
                "caught up: running {} missed slot(s){paused}{} (catch_up: all)",
                self.run.len(),
                if self.left_out > 0 {
                    format!("; {} older ones left out by catch_up_limit", self.left_out)
                } else {
                    String::new()
                }
            )),
        }
    }
}

/// Plans the round for a timed routine whose stored slot `slot` is due at `now`.
///
/// `schedule` is `None` for a one-shot. A slot more than `grace` before
/// `now` counts as missed (the daemon was down, the machine slept, the
/// clock jumped); a slot within it is simply on time, however busy the
/// timer was.
pub fn plan(
    schedule: Option<&Schedule>,
    slot: DateTime<Utc>,
    now: DateTime<Utc>,
    catch_up: CatchUp,
    catch_up_limit: u32,
    grace: Duration,
) -> SlotPlan {
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::zero());
    let mut due = vec![slot];
    let mut next = None;
    if let Some(schedule) = schedule {
        let mut cursor = slot;
        loop {
            match schedule.next_after(cursor) {
                Some(t) if t <= now && due.len() < MAX_COUNTED => {
                    due.push(t);
                    cursor = t;
                }
                Some(t) if t <= now => {
                    // Too many to count: continue from now.
                    next = schedule.next_after(now);
                    break;
                }
                other => {
                    next = other;
                    break;
                }
            }
        }
    }
    let latest = *due.last().unwrap_or(&slot);
    let on_time = now - latest <= grace;
    let missed = due.len() - usize::from(on_time);
    if missed == 0 {
        return SlotPlan {
            run: vec![latest],
            skip: None,
            left_out: 0,
            next,
        };
    }
    match catch_up {
        CatchUp::Once => SlotPlan {
            run: vec![latest],
            skip: None,
            left_out: due.len() - 1,
            next,
        },
        CatchUp::Skip => {
            let latest_missed = due[missed - 1];
            SlotPlan {
                run: if on_time { vec![latest] } else { Vec::new() },
                skip: Some(latest_missed),
                left_out: missed - 1,
                next,
            }
        }
        CatchUp::All => {
            let limit = usize::try_from(catch_up_limit).unwrap_or(usize::MAX).max(1);
            let from = due.len().saturating_sub(limit);
            SlotPlan {
                run: due[from..].to_vec(),
                skip: None,
                left_out: from,
                next,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 9, h, m, 0).unwrap()
    }

    fn hourly() -> Schedule {
        Schedule::cron("0 * * * *", chrono_tz::UTC).unwrap()
    }

    const GRACE: Duration = Duration::from_secs(60);

    #[test]
    fn an_on_time_slot_runs_and_the_next_follows() {
        let p = plan(Some(&hourly()), t(9, 0), t(9, 0), CatchUp::Once, 10, GRACE);
        assert_eq!(p.run, vec![t(9, 0)]);
        assert_eq!(p.next, Some(t(10, 0)));
        assert_eq!(p.note(CatchUp::Once, MissedWhile::Down), None);
        // Late by less than the grace: still on time, even with catch_up: skip.
        let p = plan(
            Some(&hourly()),
            t(9, 0),
            t(9, 0) + chrono::Duration::seconds(30),
            CatchUp::Skip,
            10,
            GRACE,
        );
        assert_eq!(p.run, vec![t(9, 0)]);
        assert_eq!(p.skip, None);
    }

    #[test]
    fn once_runs_the_latest_missed_slot_and_continues_from_now() {
        let p = plan(Some(&hourly()), t(3, 0), t(9, 30), CatchUp::Once, 10, GRACE);
        assert_eq!(p.run, vec![t(9, 0)]);
        assert_eq!(p.left_out, 6);
        assert_eq!(p.next, Some(t(10, 0)));
        assert!(
            p.note(CatchUp::Once, MissedWhile::Down)
                .unwrap()
                .contains("7 slot(s) were missed")
        );
    }

    #[test]
    fn skip_records_the_latest_missed_slot_and_runs_none() {
        let p = plan(Some(&hourly()), t(3, 0), t(9, 30), CatchUp::Skip, 10, GRACE);
        assert!(p.run.is_empty());
        assert_eq!(p.skip, Some(t(9, 0)));
        assert_eq!(p.next, Some(t(10, 0)));
        assert!(
            p.note(CatchUp::Skip, MissedWhile::Down)
                .unwrap()
                .starts_with("7 slot(s) were missed")
        );
        // The slot that is on time still runs.
        let p = plan(Some(&hourly()), t(3, 0), t(9, 0), CatchUp::Skip, 10, GRACE);
        assert_eq!(p.run, vec![t(9, 0)]);
        assert_eq!(p.skip, Some(t(8, 0)));
    }

    #[test]
    fn all_runs_each_missed_slot_up_to_the_limit() {
        let p = plan(Some(&hourly()), t(6, 0), t(9, 30), CatchUp::All, 10, GRACE);
        assert_eq!(p.run, vec![t(6, 0), t(7, 0), t(8, 0), t(9, 0)]);
        assert_eq!(p.left_out, 0);
        let p = plan(Some(&hourly()), t(0, 0), t(9, 30), CatchUp::All, 3, GRACE);
        assert_eq!(p.run, vec![t(7, 0), t(8, 0), t(9, 0)]);
        assert_eq!(p.left_out, 7);
        assert!(
            p.note(CatchUp::All, MissedWhile::Down)
                .unwrap()
                .contains("7 older ones left out")
        );
    }

    #[test]
    fn slots_missed_while_paused_say_so() {
        let p = plan(Some(&hourly()), t(3, 0), t(9, 30), CatchUp::Once, 10, GRACE);
        assert_eq!(
            p.note(CatchUp::Once, MissedWhile::Paused).unwrap(),
            "caught up: 7 slot(s) were missed while the routine was paused; ran the latest once (catch_up: once)"
        );
        let p = plan(Some(&hourly()), t(3, 0), t(9, 30), CatchUp::Skip, 10, GRACE);
        assert_eq!(
            p.note(CatchUp::Skip, MissedWhile::Paused).unwrap(),
            "7 slot(s) were missed while the routine was paused; none run (catch_up: skip)"
        );
    }

    #[test]
    fn a_one_shot_has_no_next_slot() {
        let p = plan(None, t(9, 0), t(9, 0), CatchUp::Once, 10, GRACE);
        assert_eq!(p.run, vec![t(9, 0)]);
        assert_eq!(p.next, None);
        let p = plan(None, t(9, 0), t(12, 0), CatchUp::Skip, 10, GRACE);
        assert_eq!(p.skip, Some(t(9, 0)));
        assert!(p.run.is_empty());
    }
}
