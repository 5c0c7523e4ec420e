//! Human schedule phrases, English and French, parsed deterministically (no LLM).
//!
//! A phrase is a *lead* (what kind of schedule and which days) and, for day
//! leads, one or more times (`at 9am`, `à 9h`, `at 9am and 5pm`, `à 9h et
//! 17h`); the times may also come first (`at 9am on weekdays`). Leads:
//! - intervals: `every 30s`, `every 2 hours`, `every 90 minutes`,
//!   `toutes les 5 minutes`, `chaque heure` — elapsed time from an anchor
//!   (`now`, or `from <RFC 3339>` as in the normalized form);
//! - calendar days, which become cron: `hourly`, `daily`, `every day`,
//!   `every weekday`, `weekdays`, `weekends`, `every monday`,
//!   `every mon,wed,fri`, `every month on the 1st`, `on the 1st of every
//!   month`, `tous les jours`, `chaque lundi`, `en semaine`,
//!   `du lundi au vendredi`, `le week-end`, `le 1er de chaque mois`;
//! - every N calendar days at a time: `every other day`, `every 3 days at 9am`,
//!   `un jour sur deux`, `tous les deux jours à 8h`, from the next occurrence
//!   of the time (midnight if none is given) or `from <YYYY-MM-DD>`; calendar
//!   days, so the local time holds across DST changes;
//! - one-shots: `in 5m`, `dans 30 minutes`, `today`, `tomorrow`, `demain`,
//!   `next friday`, `friday`, `vendredi prochain`, or a bare `at 14:30` (next occurrence).
//!
//! `every day`/`every week` mean the calendar (`daily`/`weekly`, midnight
//! unless a time is given); `every hour`, `every N days` are intervals.
//!
//! Several times of a day become one cron rule when they form a grid (every
//! listed minute of every listed hour: `9:00 and 17:00`, `9:00, 9:30, 17:00
//! and 17:30`); others (`9:15 and 17:30`) are rejected with
//! `ScheduleError::TimesNotAGrid` rather than widened, and a one-shot or an
//! every-N-days phrase takes a single time. A bare `at 9am and 5pm` is daily
//! (a bare `at 9am` stays a one-shot). Once a word has been read, an error
//! says what was understood and what was not (`ScheduleError::NotUnderstood`);
//! nothing is guessed.

mod french;
mod lead;
mod rules;

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::cron::Cron;
use super::error::ScheduleError;
use super::once::parse_iso;
use super::phrase::{TimeOfDay, Tokens};
use super::{MAX_INTERVAL, Rule};
use lead::lead;
use rules::{calendar, every_days, next_occurrence, once_on, single};

pub(crate) use rules::parse_day_step;

const AT: &[&str] = &["at", "à", "a"];
const MIDNIGHT: TimeOfDay = TimeOfDay {
    hour: 0,
    minute: 0,
    second: 0,
};
const EVERY_EXPECTED: &str = "a number with a unit (every 5m, every 2 hours), day, weekday, weekend, week, month, hour, minute or a day name";
const DAYS_EXPECTED: &str =
    "a day such as every day, on weekdays, every monday, tomorrow or friday";

/// Which days a calendar phrase selects, as cron day fields.
struct Days {
    dom: String,
    dow: String,
}

impl Days {
    fn weekdays(dow: &str) -> Days {
        Days {
            dom: "*".to_string(),
            dow: dow.to_string(),
        }
    }

    fn month_day(dom: String) -> Days {
        Days {
            dom,
            dow: "*".to_string(),
        }
    }
}

/// The day of a one-shot.
enum OneDay {
    /// Today plus this many days.
    Offset(i64),
    /// The first such weekday strictly after today (`next friday`).
    Next(u32),
    /// The next time this weekday comes round at the given time, possibly today (`friday`).
    On(u32),
}

/// What a phrase starts with.
enum Lead {
    Days(Days),
    Day(OneDay),
    Interval(u64),
    /// Every `n` calendar days at a time of day, from its next occurrence (`every other day`).
    EveryDays(u64),
    Cron(&'static str),
    After(u64),
}

/// Parses a human phrase into a rule, in `zone`, relative to `now` (whole seconds).
pub(crate) fn parse(expr: &str, zone: Tz, now: DateTime<Utc>) -> Result<Rule, ScheduleError> {
    let mut t = Tokens::new(expr);
    let rule = phrase(&mut t, zone, now)?;
    t.finish()?;
    Ok(rule)
}

/// Parses the rest of a normalized interval, `<duration> from <RFC 3339>` (after `every `).
pub(crate) fn parse_anchored_interval(
    expr: &str,
    rest: &str,
) -> Result<(Duration, DateTime<Utc>), ScheduleError> {
    let mut t = Tokens::new(rest);
    let secs = t.duration().map_err(|e| reword(e, expr))?;
    let every = interval(expr, secs)?;
    if !t.eat(&["from"]) {
        return Err(reword(t.unexpected("from <RFC 3339 instant>"), expr));
    }
    let anchor = anchor(&mut t).map_err(|e| reword(e, expr))?;
    t.finish().map_err(|e| reword(e, expr))?;
    Ok((every, anchor))
}

/// Puts the whole expression back into an error raised on part of it.
fn reword(err: ScheduleError, expr: &str) -> ScheduleError {
    let whole = expr.to_string();
    match err {
        ScheduleError::Unexpected {
            token, expected, ..
        } => ScheduleError::Unexpected {
            expr: whole,
            token,
            expected,
        },
        ScheduleError::Incomplete { expected, .. } => ScheduleError::Incomplete {
            expr: whole,
            expected,
        },
        ScheduleError::UnknownUnit { unit, .. } => ScheduleError::UnknownUnit { expr: whole, unit },
        ScheduleError::NotUnderstood { rest, expected, .. } => ScheduleError::Unexpected {
            expr: whole,
            token: rest,
            expected,
        },
        other => other,
    }
}

fn phrase(t: &mut Tokens<'_>, zone: Tz, now: DateTime<Utc>) -> Result<Rule, ScheduleError> {
    let expr = t.expr();
    if t.eat(&["at", "à"]) {
        let tods = times(t)?;
        if t.at_end() {
            // One time is the next occurrence; several ("at 9am and 5pm") are every day.
            return match tods.as_slice() {
                [tod] => next_occurrence(expr, zone, now, *tod).map(Rule::Once),
                _ => calendar(expr, &tods, &Days::weekdays("*")),
            };
        }
        let start = t.position();
        return match lead(t)? {
            Some(Lead::Days(days)) => calendar(expr, &tods, &days),
            Some(Lead::Day(day)) => {
                once_on(expr, zone, now, &day, single(expr, &tods, ONE_SHOT)?).map(Rule::Once)
            }
            Some(Lead::EveryDays(n)) => {
                let tod = single(expr, &tods, EVERY_DAYS)?;
                every_days(t, zone, now, n, tod)
            }
            _ => {
                t.rewind(start);
                Err(t.unexpected(DAYS_EXPECTED))
            }
        };
    }
    match lead(t)? {
        None => Err(ScheduleError::Unrecognized {
            expr: expr.to_string(),
        }),
        Some(Lead::Days(days)) => {
            let tods = if t.eat(AT) { times(t)? } else { vec![MIDNIGHT] };
            calendar(expr, &tods, &days)
        }
        Some(Lead::Day(day)) => {
            t.eat(AT);
            let tods = times(t)?;
            once_on(expr, zone, now, &day, single(expr, &tods, ONE_SHOT)?).map(Rule::Once)
        }
        Some(Lead::EveryDays(n)) => {
            let tod = if t.eat(AT) {
                single(expr, &times(t)?, EVERY_DAYS)?
            } else {
                MIDNIGHT
            };
            every_days(t, zone, now, n, tod)
        }
        Some(Lead::Interval(secs)) => {
            let every = interval(expr, secs)?;
            let anchor = if t.eat(&["from", "depuis"]) {
                anchor(t)?
            } else {
                now
            };
            Ok(Rule::Interval { every, anchor })
        }
        Some(Lead::Cron(text)) => Ok(Rule::Cron(Cron::parse(text)?)),
        Some(Lead::After(secs)) => {
            let secs = interval(expr, secs)?.as_secs();
            let at = i64::try_from(secs)
                .ok()
                .and_then(|s| now.timestamp().checked_add(s))
                .and_then(|s| DateTime::from_timestamp(s, 0))
                .ok_or_else(|| too_large(expr))?;
            Ok(Rule::Once(at))
        }
    }
}

fn too_large(expr: &str) -> ScheduleError {
    ScheduleError::TooLarge {
        expr: expr.to_string(),
        what: "the duration",
        limit: "the longest is 100 years",
    }
}

fn interval(expr: &str, secs: u64) -> Result<Duration, ScheduleError> {
    if secs == 0 {
        return Err(ScheduleError::ZeroInterval {
            expr: expr.to_string(),
        });
    }
    let every = Duration::from_secs(secs);
    if every > MAX_INTERVAL {
        return Err(too_large(expr));
    }
    Ok(every)
}

fn anchor(t: &mut Tokens<'_>) -> Result<DateTime<Utc>, ScheduleError> {
    const EXPECTED: &str = "an RFC 3339 instant such as 2026-03-09T10:17:00Z";
    match t.peek() {
        Some(word) if word.len() >= 10 && word.contains('t') => {
            let at = parse_iso(word, chrono_tz::UTC).map_err(|_| t.unexpected(EXPECTED))?;
            t.next();
            Ok(at)
        }
        _ => Err(t.unexpected(EXPECTED)),
    }
}

/// One or more times of day: `9am`, `9am and 5pm`, `9h, 12h et 17h`, `9am and at 5pm`.
fn times(t: &mut Tokens<'_>) -> Result<Vec<TimeOfDay>, ScheduleError> {
    let mut list = vec![t.time_of_day()?];
    loop {
        let save = t.position();
        let comma = t.eat(&[","]);
        let joined = t.eat(&["and", "et"]);
        if !comma && !joined {
            break;
        }
        t.eat(AT);
        if !t.peek().is_some_and(starts_time) {
            // The separator belongs to what follows; let the caller judge it.
            t.rewind(save);
            break;
        }
        list.push(t.time_of_day()?);
    }
    list.sort_unstable_by_key(|tod| tod.seconds());
    list.dedup();
    Ok(list)
}

/// Whether a token can begin a time of day.
fn starts_time(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_digit())
        || ["noon", "midday", "midi", "midnight", "minuit"].contains(&word)
}

const ONE_SHOT: &str = "a one-shot";
const EVERY_DAYS: &str = "a schedule every N days";
