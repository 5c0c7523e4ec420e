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

use std::time::Duration;

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Utc};
use chrono_tz::Tz;

use super::calendar::{civil_from_days, days_from_civil, weekday};
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

/// The only time of a list, or an error naming the kind of schedule that takes one.
fn single(expr: &str, tods: &[TimeOfDay], what: &'static str) -> Result<TimeOfDay, ScheduleError> {
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
fn every_days(
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
fn calendar(expr: &str, tods: &[TimeOfDay], days: &Days) -> Result<Rule, ScheduleError> {
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
        "un" if t.peek2() == Some("jour") => {
            t.next();
            t.next();
            t.expect(&["sur"], "sur (as in \"un jour sur deux\")")?;
            t.expect(&["deux", "2"], "deux (as in \"un jour sur deux\")")?;
            return Ok(Some(Lead::EveryDays(2)));
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
        "other" => {
            t.next();
            t.expect(&["day"], "day (as in \"every other day\")")?;
            Ok(Lead::EveryDays(2))
        }
        _ if weekday_name(&word).is_some() => days(&day_list(t)?),
        _ if t.at_duration() => days_or_interval(t),
        _ => Err(t.unexpected(EVERY_EXPECTED)),
    }
}

/// A duration after `every`: whole days followed by a time (`every 3 days at 9am`)
/// count calendar days from that time; anything else is elapsed time from now.
fn days_or_interval(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
    let secs = t.duration()?;
    if secs > 0 && secs % 86_400 == 0 && t.peek().is_some_and(|w| AT.contains(&w)) {
        Ok(Lead::EveryDays(secs / 86_400))
    } else {
        Ok(Lead::Interval(secs))
    }
}

/// Whether the current token starts a day of the month (`the 1st`, `15th`, `last day`).
fn at_month_day(t: &Tokens<'_>) -> bool {
    t.peek()
        .is_some_and(|w| w == "the" || w == "last" || w.starts_with(|c: char| c.is_ascii_digit()))
}

/// After `on`: `weekdays`, `weekends`, `mondays` (recurring), `friday` (one-shot)
/// or `the 1st of every month`.
fn on(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
    if at_month_day(t) {
        t.eat(&["the"]);
        let dom = if t.eat(&["last"]) {
            t.expect(&["day"], "day (as in \"on the last day of every month\")")?;
            "L".to_string()
        } else {
            t.eat(&["day"]);
            t.day_of_month()?.to_string()
        };
        t.expect(&["of"], "of (as in \"on the 1st of every month\")")?;
        t.expect(
            &["every", "each"],
            "every (as in \"on the 1st of every month\")",
        )?;
        t.expect(&["month"], "month (as in \"on the 1st of every month\")")?;
        return Ok(Lead::Days(Days::month_day(dom)));
    }
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
                "deux" if t.peek2() == Some("jours") => {
                    t.next();
                    t.next();
                    Ok(Lead::EveryDays(2))
                }
                _ if weekday_name(&word).is_some() => days(&day_list(t)?),
                _ if t.at_duration() => days_or_interval(t),
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
            // "le" / "les": le week-end, les week-ends, le lundi (every Monday),
            // le 1er de chaque mois, le dernier jour de chaque mois.
            if t.eat(&["week-end", "weekend", "week-ends", "weekends"]) {
                return days("0,6");
            }
            if first == "le"
                && t.peek()
                    .is_some_and(|w| w == "dernier" || w.starts_with(|c: char| c.is_ascii_digit()))
            {
                let dom = if t.eat(&["dernier"]) {
                    t.expect(&["jour"], "jour (as in \"le dernier jour de chaque mois\")")?;
                    "L".to_string()
                } else {
                    t.day_of_month()?.to_string()
                };
                t.expect(&["de"], "de (as in \"le 1er de chaque mois\")")?;
                if !t.eat(&["chaque"]) {
                    t.expect(&["tous"], "chaque mois or tous les mois")?;
                    t.expect(&["les"], "les mois")?;
                }
                t.expect(&["mois"], "mois (as in \"le 1er de chaque mois\")")?;
                return Ok(Lead::Days(Days::month_day(dom)));
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
