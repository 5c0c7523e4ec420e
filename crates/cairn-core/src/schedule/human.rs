//! Human schedule phrases, English and French, parsed deterministically (no LLM).
//!
//! A phrase is a *lead* (what kind of schedule and which days) and, for day
//! leads, a time (`at 9am`, `à 9h`); the time may also come first
//! (`at 9am on weekdays`). Leads:
//! - intervals: `every 30s`, `every 2 hours`, `every 90 minutes`,
//!   `toutes les 5 minutes`, `chaque heure` — elapsed time from an anchor
//!   (`now`, or `from <RFC 3339>` as in the normalized form);
//! - calendar days, which become cron: `hourly`, `daily`, `every day`,
//!   `every weekday`, `weekdays`, `weekends`, `every monday`,
//!   `every mon,wed,fri`, `every month on the 1st`, `tous les jours`,
//!   `chaque lundi`, `en semaine`, `du lundi au vendredi`, `le week-end`;
//! - one-shots: `in 5m`, `dans 30 minutes`, `today`, `tomorrow`, `demain`,
//!   `next friday`, `friday`, `vendredi prochain`, or a bare `at 14:30` (next occurrence).
//!
//! `every day`/`every week` mean the calendar (`daily`/`weekly`, midnight
//! unless a time is given); `every hour`, `every N days` are intervals.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::calendar::weekday;
use super::cron::Cron;
use super::error::ScheduleError;
use super::once::{at_local, local_day, parse_iso};
use super::phrase::{TimeOfDay, Tokens, unit_seconds, weekday_name};
use super::{MAX_INTERVAL, Rule};

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
        other => other,
    }
}

fn phrase(t: &mut Tokens<'_>, zone: Tz, now: DateTime<Utc>) -> Result<Rule, ScheduleError> {
    let expr = t.expr();
    if t.eat(&["at", "à"]) {
        let tod = t.time_of_day()?;
        if t.at_end() {
            return next_occurrence(expr, zone, now, tod).map(Rule::Once);
        }
        let start = t.position();
        return match lead(t)? {
            Some(Lead::Days(days)) => calendar(expr, tod, &days),
            Some(Lead::Day(day)) => once_on(expr, zone, now, &day, tod).map(Rule::Once),
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
            let tod = if t.eat(AT) {
                t.time_of_day()?
            } else {
                MIDNIGHT
            };
            calendar(expr, tod, &days)
        }
        Some(Lead::Day(day)) => {
            t.eat(AT);
            let tod = t.time_of_day()?;
            once_on(expr, zone, now, &day, tod).map(Rule::Once)
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

fn calendar(expr: &str, tod: TimeOfDay, days: &Days) -> Result<Rule, ScheduleError> {
    let TimeOfDay {
        hour,
        minute,
        second,
    } = tod;
    let (dom, dow) = (&days.dom, &days.dow);
    let text = if second == 0 {
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

fn next_occurrence(
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

fn once_on(
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

/// Weekday names joined by `,`/`and`/`et`, as a sorted cron list (`1,3,5`).
fn day_list(t: &mut Tokens<'_>) -> Result<String, ScheduleError> {
    let mut days = Vec::new();
    loop {
        match t.peek().and_then(weekday_name) {
            Some((day, _)) => {
                t.next();
                days.push(day);
            }
            None => return Err(t.unexpected("a day name such as monday or mon")),
        }
        let save = (
            t.peek().map(str::to_string),
            t.peek2().and_then(weekday_name),
        );
        match save {
            (Some(sep), Some(_)) if [",", "and", "et"].contains(&sep.as_str()) => {
                t.next();
            }
            _ => break,
        }
    }
    days.sort_unstable();
    days.dedup();
    Ok(days
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(","))
}

/// `on the 1st`, `on the last day`, `on day 15`, `le 1er`, `le dernier jour`; the 1st when absent.
fn month_day(t: &mut Tokens<'_>) -> Result<String, ScheduleError> {
    if !t.eat(&["on", "le"]) {
        return Ok("1".to_string());
    }
    t.eat(&["the"]);
    if t.eat(&["last"]) {
        t.expect(&["day"], "day (as in \"on the last day\")")?;
        return Ok("L".to_string());
    }
    if t.eat(&["dernier"]) {
        t.expect(&["jour"], "jour (as in \"le dernier jour\")")?;
        return Ok("L".to_string());
    }
    t.eat(&["day", "jour"]);
    Ok(t.day_of_month()?.to_string())
}

/// Reads the start of a phrase; `None` when the first token starts nothing we know.
fn lead(t: &mut Tokens<'_>) -> Result<Option<Lead>, ScheduleError> {
    let Some(word) = t.peek().map(str::to_string) else {
        return Ok(None);
    };
    let every_day = || Lead::Days(Days::weekdays("*"));
    let lead = match word.as_str() {
        "every" => {
            t.next();
            return every(t).map(Some);
        }
        "hourly" => Lead::Cron("0 * * * *"),
        "yearly" | "annually" => Lead::Cron("0 0 1 1 *"),
        "daily" | "everyday" | "quotidiennement" => every_day(),
        "weekdays" => Lead::Days(Days::weekdays("1-5")),
        "weekends" => Lead::Days(Days::weekdays("0,6")),
        "weekly" => {
            t.next();
            let dow = if t.eat(&["on"]) {
                day_list(t)?
            } else {
                "0".to_string()
            };
            return Ok(Some(Lead::Days(Days::weekdays(&dow))));
        }
        "monthly" => {
            t.next();
            return Ok(Some(Lead::Days(Days::month_day(month_day(t)?))));
        }
        "on" => {
            t.next();
            return on(t).map(Some);
        }
        "in" | "dans" => {
            t.next();
            return Ok(Some(Lead::After(t.duration()?)));
        }
        "today" | "aujourd'hui" => Lead::Day(OneDay::Offset(0)),
        "tomorrow" | "demain" => Lead::Day(OneDay::Offset(1)),
        "après-demain" | "apres-demain" => Lead::Day(OneDay::Offset(2)),
        "next" => {
            t.next();
            return match t.peek().and_then(weekday_name) {
                Some((day, false)) => {
                    t.next();
                    Ok(Some(Lead::Day(OneDay::Next(day))))
                }
                _ => Err(t.unexpected("a day name such as friday")),
            };
        }
        "toutes" | "tous" | "chaque" | "en" | "du" | "le" | "les" => {
            return french(t).map(Some);
        }
        _ => match weekday_name(&word) {
            Some((_, true)) => return Ok(Some(Lead::Days(Days::weekdays(&day_list(t)?)))),
            Some((day, false)) => {
                t.next();
                if t.eat(&["prochain"]) {
                    return Ok(Some(Lead::Day(OneDay::Next(day))));
                }
                return Ok(Some(Lead::Day(OneDay::On(day))));
            }
            None => return Ok(None),
        },
    };
    t.next();
    Ok(Some(lead))
}

/// After `every`.
fn every(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
    let Some(word) = t.peek().map(str::to_string) else {
        return Err(t.unexpected(EVERY_EXPECTED));
    };
    let days = |dow: &str| Ok(Lead::Days(Days::weekdays(dow)));
    match word.as_str() {
        "day" => {
            t.next();
            days("*")
        }
        "weekday" | "weekdays" => {
            t.next();
            days("1-5")
        }
        "weekend" | "weekends" => {
            t.next();
            t.eat(&["day", "days"]);
            days("0,6")
        }
        "week" => {
            t.next();
            if t.eat(&["on"]) {
                days(&day_list(t)?)
            } else {
                days("0")
            }
        }
        "month" => {
            t.next();
            Ok(Lead::Days(Days::month_day(month_day(t)?)))
        }
        "year" => {
            t.next();
            Ok(Lead::Cron("0 0 1 1 *"))
        }
        "hour" | "minute" | "second" => {
            t.next();
            Ok(Lead::Interval(unit_seconds(&word).unwrap_or(1)))
        }
        _ if weekday_name(&word).is_some() => days(&day_list(t)?),
        _ if t.at_duration() => Ok(Lead::Interval(t.duration()?)),
        _ => Err(t.unexpected(EVERY_EXPECTED)),
    }
}

/// After `on`: `weekdays`, `weekends`, `mondays` (recurring) or `friday` (one-shot).
fn on(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
    if t.eat(&["weekdays"]) {
        return Ok(Lead::Days(Days::weekdays("1-5")));
    }
    if t.eat(&["weekends"]) {
        return Ok(Lead::Days(Days::weekdays("0,6")));
    }
    match t.peek().and_then(weekday_name) {
        Some((_, true)) => Ok(Lead::Days(Days::weekdays(&day_list(t)?))),
        Some((day, false)) => {
            t.next();
            Ok(Lead::Day(OneDay::On(day)))
        }
        None => Err(t.unexpected("weekdays, weekends or a day name such as monday or mondays")),
    }
}

/// French leads: `toutes les …`, `tous les …`, `chaque …`, `en semaine`, `du … au …`, `le week-end`.
fn french(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
    let first = t.next().unwrap_or_default();
    let days = |dow: &str| Ok(Lead::Days(Days::weekdays(dow)));
    match first.as_str() {
        "toutes" | "tous" => {
            t.expect(&["les"], "les")?;
            let word = t.peek().unwrap_or_default().to_string();
            match word.as_str() {
                "heures" | "minutes" | "secondes" | "semaines" => {
                    t.next();
                    Ok(Lead::Interval(unit_seconds(&word).unwrap_or(1)))
                }
                "jours" => {
                    t.next();
                    days("*")
                }
                "mois" => {
                    t.next();
                    Ok(Lead::Days(Days::month_day(month_day(t)?)))
                }
                _ if weekday_name(&word).is_some() => days(&day_list(t)?),
                _ if t.at_duration() => Ok(Lead::Interval(t.duration()?)),
                _ => Err(t.unexpected(
                    "jours, mois, heures, minutes, a day name or a number with a unit",
                )),
            }
        }
        "chaque" => {
            let word = t.peek().unwrap_or_default().to_string();
            match word.as_str() {
                "jour" => {
                    t.next();
                    days("*")
                }
                "semaine" => {
                    t.next();
                    days("0")
                }
                "mois" => {
                    t.next();
                    Ok(Lead::Days(Days::month_day(month_day(t)?)))
                }
                "heure" | "minute" | "seconde" => {
                    t.next();
                    Ok(Lead::Interval(unit_seconds(&word).unwrap_or(1)))
                }
                _ if weekday_name(&word).is_some() => days(&day_list(t)?),
                _ => Err(t.unexpected("jour, mois, heure, minute or a day name such as lundi")),
            }
        }
        "en" => {
            t.expect(&["semaine"], "semaine (as in \"en semaine\")")?;
            days("1-5")
        }
        "du" => {
            let from = french_day(t)?;
            t.expect(&["au"], "au (as in \"du lundi au vendredi\")")?;
            let to = french_day(t)?;
            if from <= to {
                return days(&format!("{from}-{to}"));
            }
            // Ranges wrap round the week: du vendredi au lundi = Fri, Sat, Sun, Mon.
            let mut list: Vec<u32> = (0..7).map(|i| (from + i) % 7).collect();
            list.truncate(((to + 7 - from) % 7 + 1) as usize);
            list.sort_unstable();
            days(
                &list
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            )
        }
        _ => {
            // "le" / "les": le week-end, les week-ends, le lundi (every Monday).
            if t.eat(&["week-end", "weekend", "week-ends", "weekends"]) {
                return days("0,6");
            }
            match t.peek().and_then(weekday_name) {
                Some(_) => days(&day_list(t)?),
                None => Err(t.unexpected("week-end or a day name such as lundi")),
            }
        }
    }
}

fn french_day(t: &mut Tokens<'_>) -> Result<u32, ScheduleError> {
    match t.peek().and_then(weekday_name) {
        Some((day, _)) => {
            t.next();
            Ok(day)
        }
        None => Err(t.unexpected("a day name such as lundi")),
    }
}
