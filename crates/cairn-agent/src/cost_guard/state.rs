//! The guard's counters as plain data: today's spend and the last hour's
//! calls, with the rules for rolling them forward (a guard in memory only).
//! Pure: the caller passes every instant in.

use std::collections::VecDeque;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};

/// The length of the sliding window of the hourly limit.
pub(super) const WINDOW: TimeDelta = TimeDelta::hours(1);

/// Today's spend and the recent calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Counters {
    /// The UTC day `spent_micros` belongs to.
    pub date: NaiveDate,
    /// Spent on `date`, in micro-dollars.
    pub spent_micros: u64,
    /// Whether the 80% warning was already given on `date`.
    pub warned: bool,
    /// Start times of the calls of the last hour, oldest first.
    pub calls: VecDeque<DateTime<Utc>>,
}

impl Counters {
    /// Nothing spent on `now`'s UTC day, no recent calls.
    pub fn new(now: DateTime<Utc>) -> Self {
        Self {
            date: now.date_naive(),
            spent_micros: 0,
            warned: false,
            calls: VecDeque::new(),
        }
    }

    /// Starts a new day when `now` falls on another UTC date than the
    /// counters; returns whether it did. The call window is left alone: it
    /// slides across midnight.
    pub fn roll_to(&mut self, now: DateTime<Utc>) -> bool {
        let today = now.date_naive();
        if self.date == today {
            return false;
        }
        self.date = today;
        self.spent_micros = 0;
        self.warned = false;
        true
    }

    /// Forgets calls that left the window (exactly one hour old included).
    pub fn prune(&mut self, now: DateTime<Utc>) {
        let cutoff = now - WINDOW;
        // The window is sorted, so expired calls are all at the front.
        while self.calls.front().is_some_and(|at| *at <= cutoff) {
            self.calls.pop_front();
        }
    }

    /// Records a call started at `at`, keeping the window sorted.
    pub fn push_call(&mut self, at: DateTime<Utc>) {
        let position = self.calls.partition_point(|t| *t <= at);
        self.calls.insert(position, at);
    }

    /// Calls in the window (after [`Counters::prune`]).
    pub fn window_len(&self) -> u64 {
        u64::try_from(self.calls.len()).unwrap_or(u64::MAX)
    }

    /// When the window will have room for one more call under `limit`, or
    /// `None` if it never will (a limit of zero).
    pub fn next_slot(&self, limit: u64) -> Option<DateTime<Utc>> {
        let limit = usize::try_from(limit).ok().filter(|l| *l > 0)?;
        // Room appears when the oldest `len - limit + 1` calls have left.
        let index = self.calls.len().checked_sub(limit)?;
        self.calls.get(index).map(|at| *at + WINDOW)
    }
}

/// Whether `spent` reached 80% of `budget` (integer arithmetic, no overflow).
pub(super) fn reaches_warning(spent_micros: u64, budget_micros: u64) -> bool {
    u128::from(spent_micros) * 5 >= u128::from(budget_micros) * 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 9, h, m, s).unwrap()
    }

    #[test]
    fn window_is_sorted_pruned_and_finds_the_next_slot() {
        let mut c = Counters::new(at(13, 0, 0));
        c.push_call(at(13, 10, 0));
        c.push_call(at(13, 2, 30));
        c.push_call(at(13, 20, 0));
        assert_eq!(c.calls.front(), Some(&at(13, 2, 30)));
        assert_eq!(c.next_slot(3), Some(at(14, 2, 30)));
        assert_eq!(c.next_slot(2), Some(at(14, 10, 0)));
        assert_eq!(c.next_slot(4), None);
        assert_eq!(c.next_slot(0), None);
        c.prune(at(14, 2, 30));
        assert_eq!(c.window_len(), 2);
    }

    #[test]
    fn rolling_resets_spend_but_not_the_window() {
        let mut c = Counters::new(at(23, 0, 0));
        c.spent_micros = 7;
        c.warned = true;
        c.push_call(at(23, 50, 0));
        assert!(!c.roll_to(at(23, 59, 59)));
        let tomorrow = Utc.with_ymd_and_hms(2026, 3, 10, 0, 0, 0).unwrap();
        assert!(c.roll_to(tomorrow));
        assert_eq!((c.spent_micros, c.warned, c.window_len()), (0, false, 1));
    }

    #[test]
    fn warning_threshold_is_exact() {
        assert!(reaches_warning(800, 1_000));
        assert!(!reaches_warning(799, 1_000));
        assert!(reaches_warning(u64::MAX, u64::MAX));
        assert!(reaches_warning(0, 0));
    }
}
