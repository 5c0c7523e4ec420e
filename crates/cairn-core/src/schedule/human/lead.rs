//! English leads: `every …`, `on …`, day lists and days of the month.

use super::french::french;
use super::{AT, Days, EVERY_EXPECTED, Lead, OneDay};
use crate::schedule::error::ScheduleError;
use crate::schedule::phrase::{Tokens, unit_seconds, weekday_name};

/// Weekday names joined by `,`/`and`/`et`, as a sorted cron list (`1,3,5`).
pub(super) fn day_list(t: &mut Tokens<'_>) -> Result<String, ScheduleError> {
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
pub(super) fn month_day(t: &mut Tokens<'_>) -> Result<String, ScheduleError> {
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
pub(super) fn lead(t: &mut Tokens<'_>) -> Result<Option<Lead>, ScheduleError> {
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
pub(super) fn days_or_interval(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
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
