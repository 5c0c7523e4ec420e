//! The next fire time of a cron expression in a time zone, DST included.
//!
//! The search walks matching local dates (bitsets, month by month) and, for
//! each, the pieces of that local day from the `zone` module: on ordinary days
//! one piece, on transition days two or three. A fixed local time (neither
//! minute nor hour starts with `*`) uses the fixed mapping; anything else fires
//! by elapsed time (see `zone`). This is Debian cron's rule, which cronsim
//! reproduces; the differential test checks it.

use chrono_tz::Tz;

use super::calendar::{civil_from_days, days_from_civil};
use super::cron::Cron;
use super::zone::{MAX_INSTANT, MIN_INSTANT, Map, day_pieces, offset_at};

/// How far ahead a search looks: the Gregorian calendar (weekdays included)
/// repeats every 400 years, so an expression that matched nothing in that span never will.
const HORIZON_MONTHS: u32 = 401 * 12;
const HORIZON_DAYS: i64 = 401 * 366;

impl Cron {
    /// The first instant strictly after `from` (Unix seconds) at which the expression fires in `tz`.
    pub(crate) fn next_after_seconds(&self, tz: Tz, from: i64) -> Option<i64> {
        let from = from.max(MIN_INSTANT - 1);
        // Leave room for the one-day look-around below without leaving chrono's range.
        if from >= MAX_INSTANT - 3 * 86_400 {
            return None;
        }
        let from_local = from + offset_at(tz, from);
        let mut day = from_local.div_euclid(86_400);
        if !self.fixed_time {
            // After a fall-back that crosses midnight, the previous local date
            // comes round again; start a day early to see it.
            day -= 1;
        }
        let last_day = day + HORIZON_DAYS;
        loop {
            let (y, m, d) = civil_from_days(day);
            let (y, m, d) = self.first_date(y, m, d, HORIZON_MONTHS)?;
            day = days_from_civil(y, m, d);
            if day > last_day {
                return None;
            }
            let (found, transition) = self.first_on_day(tz, day, from);
            if let Some(t) = found {
                if transition {
                    // A fall-back can put part of the next local day before this one's match.
                    let (ny, nm, nd) = civil_from_days(day + 1);
                    if self.date_matches(ny, nm, nd)
                        && let (Some(next), _) = self.first_on_day(tz, day + 1, from)
                    {
                        return Some(t.min(next));
                    }
                }
                return Some(t);
            }
            day += 1;
        }
    }

    /// The first fire strictly after `from` whose local time is on local day
    /// `day` (a matching date), and whether the zone changes offset near it.
    fn first_on_day(&self, tz: Tz, day: i64, from: i64) -> (Option<i64>, bool) {
        let s0 = day * 86_400;
        let pieces = day_pieces(tz, s0, self.fixed_time);
        for piece in pieces.as_slice() {
            match piece.map {
                Map::Linear(off) => {
                    let lo = piece.lo.max(from + off + 1);
                    if lo >= piece.hi {
                        continue;
                    }
                    if let Some(tod) = self.next_tod((lo - s0) as u32, (piece.hi - s0) as u32) {
                        return (Some(s0 + i64::from(tod) - off), pieces.has_transition);
                    }
                }
                Map::Gap(t) => {
                    let hit = self.next_tod((piece.lo - s0) as u32, (piece.hi - s0) as u32);
                    if t > from && hit.is_some() {
                        return (Some(t), pieces.has_transition);
                    }
                }
            }
        }
        (None, pieces.has_transition)
    }
}
