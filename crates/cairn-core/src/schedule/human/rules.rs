//! Turning a phrase's lead and times into a rule: calendar cron, day steps and one-shot instants.

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Utc};
use chrono_tz::Tz;

use super::{Days, OneDay, interval, reword, too_large};
use crate::schedule::Rule;
use crate::schedule::calendar::{civil_from_days, days_from_civil, weekday};
use crate::schedule::cron::Cron;
use crate::schedule::error::ScheduleError;
use crate::schedule::once::{at_local, local_day};
use crate::schedule::phrase::{TimeOfDay, Tokens};

/// The only time of a list, or an error naming the kind of schedule that takes one.
pub(super) fn single(
    expr: &str,
    tods: &[TimeOfDay],
    what: &'static str,
) -> Result<TimeOfDay, ScheduleError> {
    match tods {
        [tod] => Ok(*tod),
        _ => Err(ScheduleError::OneTimeOnly {
            expr: expr.to_string(),
            what,
        }),
    }
}

/// Every `n` calendar days at `tod`, from `from <date>` when given, else from
/// the next `tod` (today if still ahead, else tomorrow). Calendar days, not
/// 24-hour periods, so the local time holds across DST changes.
pub(super) fn every_days(
    t: &mut Tokens<'_>,
    zone: Tz,
    now: DateTime<Utc>,
    n: u64,
    tod: TimeOfDay,
) -> Result<Rule, ScheduleError> {
    let expr = t.expr();
    let first = if t.eat(&["from", "depuis"]) {
        date(t)?
    } else {
        let today = local_day(zone, now);
        if at_local(expr, zone, today, tod.seconds())? > now {
            today
        } else {
            today + 1
        }
    };
    day_step(expr, n, tod, first)
}

/// Builds the rule of [`every_days`], checking the step and the date's range.
fn day_step(expr: &str, n: u64, tod: TimeOfDay, first: i64) -> Result<Rule, ScheduleError> {
    interval(expr, n.saturating_mul(86_400))?;
    let every = u32::try_from(n).map_err(|_| too_large(expr))?;
    let (y, m, d) = civil_from_days(first);
    let first = i32::try_from(y)
        .ok()
        .filter(|y| (1..=9999).contains(y))
        .and_then(|y| NaiveDate::from_ymd_opt(y, m, d))
        .ok_or(ScheduleError::TooLarge {
            expr: expr.to_string(),
            what: "the date",
            limit: "years 1 to 9999 are supported",
        })?;
    let at = NaiveTime::from_num_seconds_from_midnight_opt(tod.seconds(), 0)
        .ok_or_else(|| too_large(expr))?;
    Ok(Rule::EveryDays { every, at, first })
}

/// A local date `YYYY-MM-DD`, as days since 1970-01-01.
fn date(t: &mut Tokens<'_>) -> Result<i64, ScheduleError> {
    const EXPECTED: &str = "a date such as 2026-03-09";
    let parsed = t
        .peek()
        .filter(|w| w.len() == 10)
        .and_then(|w| NaiveDate::parse_from_str(w, "%Y-%m-%d").ok());
    match parsed {
        Some(day) => {
            t.next();
            Ok(days_from_civil(
                i64::from(day.year()),
                day.month(),
                day.day(),
            ))
        }
        None => Err(t.unexpected(EXPECTED)),
    }
}

/// Parses the rest of a normalized day step, `<n> days at <HH:MM:SS> from <YYYY-MM-DD>` (after `every `).
pub(crate) fn parse_day_step(expr: &str, rest: &str) -> Result<Rule, ScheduleError> {
    let mut t = Tokens::new(rest);
    let parse = |t: &mut Tokens<'_>| {
        let secs = t.duration()?;
        if secs % 86_400 != 0 {
            return Err(t.unexpected("a whole number of days"));
        }
        t.expect(&["at"], "at <HH:MM:SS>")?;
        let tod = t.time_of_day()?;
        t.expect(&["from"], "from <YYYY-MM-DD>")?;
        let first = date(t)?;
        t.finish()?;
        day_step(expr, secs / 86_400, tod, first)
    };
    parse(&mut t).map_err(|e| reword(e, expr))
}

fn hhmm(tod: &TimeOfDay) -> String {
    if tod.second == 0 {
        format!("{:02}:{:02}", tod.hour, tod.minute)
    } else {
        format!("{:02}:{:02}:{:02}", tod.hour, tod.minute, tod.second)
    }
}

/// Times of day on some days, as one cron rule. Several times must form a
/// grid (every listed minute of every listed hour): 9:00 and 17:00 do, 9:15
/// and 17:30 do not, since `15,30 9,17` would also fire at 9:30 and 17:15.
/// Those are rejected rather than widened; a list-of-times rule would need a
/// new stored form for little gain (two schedules do it).
pub(super) fn calendar(expr: &str, tods: &[TimeOfDay], days: &Days) -> Result<Rule, ScheduleError> {
    let field = |get: fn(&TimeOfDay) -> u32| {
        let mut values: Vec<u32> = tods.iter().map(get).collect();
        values.sort_unstable();
        values.dedup();
        values
    };
    let (hours, minutes, seconds) = (field(|t| t.hour), field(|t| t.minute), field(|t| t.second));
    if hours.len() * minutes.len() * seconds.len() != tods.len() {
        return Err(ScheduleError::TimesNotAGrid {
            expr: expr.to_string(),
            times: tods.iter().map(hhmm).collect::<Vec<_>>().join(" and "),
        });
    }
    let list = |values: &[u32]| {
        values
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let (hour, minute, second) = (list(&hours), list(&minutes), list(&seconds));
    let (dom, dow) = (&days.dom, &days.dow);
    let text = if seconds == [0] {
        format!("{minute} {hour} {dom} * {dow}")
    } else {
        format!("{second} {minute} {hour} {dom} * {dow}")
    };
    Cron::parse(&text).map(Rule::Cron).map_err(|err| match err {
        // Only reachable for day-of-month choices no month has (none today); keep the phrase.
        ScheduleError::NeverFires { reason, .. } => ScheduleError::NeverFires {
            expr: expr.to_string(),
            reason,
        },
        other => other,
    })
}

pub(super) fn next_occurrence(
    expr: &str,
    zone: Tz,
    now: DateTime<Utc>,
    tod: TimeOfDay,
) -> Result<DateTime<Utc>, ScheduleError> {
    let today = local_day(zone, now);
    let at = at_local(expr, zone, today, tod.seconds())?;
    if at > now {
        Ok(at)
    } else {
        at_local(expr, zone, today + 1, tod.seconds())
    }
}

pub(super) fn once_on(
    expr: &str,
    zone: Tz,
    now: DateTime<Utc>,
    day: &OneDay,
    tod: TimeOfDay,
) -> Result<DateTime<Utc>, ScheduleError> {
    let today = local_day(zone, now);
    let ahead = |wd: u32| i64::from((wd + 7 - weekday(today)) % 7);
    match *day {
        OneDay::Offset(n) => at_local(expr, zone, today + n, tod.seconds()),
        OneDay::Next(wd) => {
            let days = match ahead(wd) {
                0 => 7,
                n => n,
            };
            at_local(expr, zone, today + days, tod.seconds())
        }
        OneDay::On(wd) => {
            let at = at_local(expr, zone, today + ahead(wd), tod.seconds())?;
            if at > now {
                Ok(at)
            } else {
                at_local(expr, zone, today + ahead(wd) + 7, tod.seconds())
            }
        }
    }
}
