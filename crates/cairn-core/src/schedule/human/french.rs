//! French leads: `toutes les …`, `chaque …`, `du lundi au vendredi`, `le 1er de chaque mois`.

use super::lead::{day_list, days_or_interval, month_day};
use super::{Days, Lead};
use crate::schedule::error::ScheduleError;
use crate::schedule::phrase::{Tokens, unit_seconds, weekday_name};

/// French leads: `toutes les …`, `tous les …`, `chaque …`, `en semaine`, `du … au …`, `le week-end`.
pub(super) fn french(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
    let first = t.next().unwrap_or_default();
    match first.as_str() {
        "toutes" | "tous" => toutes_les(t),
        "chaque" => chaque(t),
        "en" => {
            t.expect(&["semaine"], "semaine (as in \"en semaine\")")?;
            days("1-5")
        }
        "du" => du_au(t),
        _ => le(t, &first),
    }
}

fn days(dow: &str) -> Result<Lead, ScheduleError> {
    Ok(Lead::Days(Days::weekdays(dow)))
}

/// `toutes les heures`, `tous les jours`, `tous les lundis`, `toutes les 2 heures`, …
fn toutes_les(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
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
        _ => Err(t.unexpected("jours, mois, heures, minutes, a day name or a number with a unit")),
    }
}

/// `chaque jour`, `chaque semaine`, `chaque mois`, `chaque heure`, `chaque lundi`.
fn chaque(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
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

/// `du lundi au vendredi`: a range of days, wrapping round the week.
fn du_au(t: &mut Tokens<'_>) -> Result<Lead, ScheduleError> {
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

/// `le` / `les`: le week-end, les week-ends, le lundi (every Monday), le 1er
/// de chaque mois, le dernier jour de chaque mois.
fn le(t: &mut Tokens<'_>, first: &str) -> Result<Lead, ScheduleError> {
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

fn french_day(t: &mut Tokens<'_>) -> Result<u32, ScheduleError> {
    match t.peek().and_then(weekday_name) {
        Some((day, _)) => {
            t.next();
            Ok(day)
        }
        None => Err(t.unexpected("a day name such as lundi")),
    }
}
