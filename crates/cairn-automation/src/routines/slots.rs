//! A routine's slots on the grid the engine fires it on: the next ones
//! (what `routine next` and `show` list) and those in a past range (what a
//! backfill runs). Intervals and day steps are anchored: the engine anchors
//! them at the stored slot, so the grid is followed from there, backwards
//! as well as forwards, and a backfilled slot is the very slot the engine
//! would have fired (the same key, so exactly once holds).

use cairn_core::routine::{Routine, Trigger};
use cairn_core::schedule::{Rule, Schedule};

use chrono::{DateTime, Duration, TimeZone, Utc};
use chrono_tz::Tz;

use super::define::{schedule_at_slot, zone_of};

/// Most slots a range is walked for: more say "too many" without counting on.
pub const MAX_COUNTED: usize = 1_000_000;

/// The routine's schedule anchored as the engine anchors it (at its stored
/// slot, else at its creation); `None` for triggers without one.
fn schedule(routine: &Routine, user_zone: Tz) -> Option<Result<Schedule, String>> {
    let Trigger::Cron { schedule } = &routine.spec.trigger else {
        return None;
    };
    let anchor = routine.runtime.next_fire_at.unwrap_or(routine.created_at);
    let zone = zone_of(&routine.spec, user_zone);
    Some(schedule_at_slot(schedule, zone, anchor).map_err(|e| e.to_string()))
}

/// Up to `count` next slots of a timed routine as of `now`: the stored one
/// first (owed, even when past), then those after it and after `now`
/// (without jitter: [`Routine::fires_at`] says when each fires).
pub fn next_slots(
    routine: &Routine,
    user_zone: Tz,
    now: DateTime<Utc>,
    count: usize,
) -> Vec<DateTime<Utc>> {
    let Some(next) = routine.runtime.next_fire_at else {
        return Vec::new();
    };
    let mut slots = vec![next];
    if let Some(Ok(schedule)) = schedule(routine, user_zone) {
        slots.extend(
            schedule
                .fire_times(next.max(now))
                .take(count.saturating_sub(1)),
        );
    }
    slots.truncate(count);
    slots
}

/// The slots of a cron routine from `from` to `to` (both included), oldest
/// first, at most `limit` of them (a longer list is cut there: the caller
/// asked for one more than it accepts, to tell "too many").
pub fn slots_between(
    routine: &Routine,
    user_zone: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: usize,
) -> Result<Vec<DateTime<Utc>>, String> {
    let schedule = match schedule(routine, user_zone) {
        Some(s) => s?,
        None => {
            return Err(format!(
                "routine \"{}\" has a {} trigger; only cron triggers have past slots to backfill",
                routine.spec.name,
                routine.spec.trigger.kind()
            ));
        }
    };
    let limit = limit.min(MAX_COUNTED);
    let mut slots = Vec::new();
    match schedule.rule() {
        Rule::Interval { every, anchor } => {
            let period = i64::try_from(every.as_secs()).unwrap_or(i64::MAX).max(1);
            let base = anchor.timestamp();
            // The first grid point at or after `from`: a ceiling division.
            let from_s = from.timestamp() + i64::from(from.timestamp_subsec_nanos() > 0);
            let mut k = (from_s - base).div_euclid(period)
                + i64::from((from_s - base).rem_euclid(period) != 0);
            while slots.len() < limit {
                let Some(t) = k
                    .checked_mul(period)
                    .and_then(|s| s.checked_add(base))
                    .and_then(|s| DateTime::from_timestamp(s, 0))
                else {
                    break;
                };
                if t > to {
                    break;
                }
                slots.push(t);
                k += 1;
            }
        }
        Rule::EveryDays { every, at, first } => {
            let zone = schedule.zone();
            let step = i64::from((*every).max(1));
            let from_date = from.with_timezone(&zone).date_naive() - Duration::days(1);
            let behind = (*first - from_date).num_days().max(0);
            let mut date = *first - Duration::days((behind + step - 1) / step * step);
            while slots.len() < limit {
                let local = date.and_time(*at);
                if let Some(t) = zone.from_local_datetime(&local).earliest() {
                    let t = t.with_timezone(&Utc);
                    if t > to {
                        break;
                    }
                    if t >= from {
                        slots.push(t);
                    }
                }
                date += Duration::days(step);
            }
        }
        _ => {
            let before = from - Duration::seconds(1);
            slots.extend(
                schedule
                    .fire_times(before)
                    .skip_while(|t| *t < from)
                    .take_while(|t| *t <= to)
                    .take(limit),
            );
        }
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {

    use super::*;
    use cairn_core::routine::{RoutineSpec, SpecFormat};

    fn routine(schedule: &str, created: DateTime<Utc>, next: DateTime<Utc>) -> Routine {
        let spec = RoutineSpec::parse(
            &format!("name: r\ntrigger: {{type: cron, schedule: '{schedule}'}}\naction: {{type: notification, message: x}}\n"),
            SpecFormat::Yaml,
        )
        .unwrap();
        let mut r = Routine::new(spec, "ada", created);
        r.runtime.next_fire_at = Some(next);
        r
    }

    fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, d, h, m, 0).unwrap()
    }

    #[test]
    fn cron_slots_in_a_range_include_both_ends() {
        let r = routine("0 9 * * *", t(1, 0, 0), t(10, 9, 0));
        let slots = slots_between(&r, Tz::UTC, t(5, 9, 0), t(7, 9, 0), 100).unwrap();
        assert_eq!(slots, [t(5, 9, 0), t(6, 9, 0), t(7, 9, 0)]);
        let cut = slots_between(&r, Tz::UTC, t(1, 0, 0), t(9, 0, 0), 3).unwrap();
        assert_eq!(cut.len(), 3);
    }

    #[test]
    fn intervals_follow_the_stored_slots_grid_backwards() {
        // Created at 00:07, every 20 minutes: slots at :27, :47, :07.
        let r = routine("every 20m", t(1, 0, 7), t(1, 3, 7));
        let slots = slots_between(&r, Tz::UTC, t(1, 1, 0), t(1, 2, 0), 100).unwrap();
        assert_eq!(slots, [t(1, 1, 7), t(1, 1, 27), t(1, 1, 47)]);
        let next = next_slots(&r, Tz::UTC, t(1, 0, 0), 3);
        assert_eq!(next, [t(1, 3, 7), t(1, 3, 27), t(1, 3, 47)]);
    }

    #[test]
    fn day_steps_follow_their_first_day_backwards() {
        let r = routine("every 2 days at 9am", t(1, 0, 0), t(10, 9, 0));
        let next = next_slots(&r, Tz::UTC, t(1, 0, 0), 2);
        assert_eq!(next, [t(10, 9, 0), t(12, 9, 0)]);
        let slots = slots_between(&r, Tz::UTC, t(3, 0, 0), t(9, 0, 0), 100).unwrap();
        assert_eq!(slots, [t(4, 9, 0), t(6, 9, 0), t(8, 9, 0)]);
    }

    #[test]
    fn triggers_without_slots_say_so() {
        let spec = RoutineSpec::parse(
            "name: hook\ntrigger: {type: webhook}\naction: {type: notification, message: x}\n",
            SpecFormat::Yaml,
        )
        .unwrap();
        let r = Routine::new(spec, "ada", t(1, 0, 0));
        let err = slots_between(&r, Tz::UTC, t(1, 0, 0), t(2, 0, 0), 10).unwrap_err();
        assert!(err.contains("webhook trigger"), "{err}");
    }
}
