//! Schedules: cron, intervals and one-shot instants, with time zones and DST.
//!
//! Pure and clock-free: every function that needs "now" takes it.
//!
//! - [`Schedule::parse`] reads what a person writes — cron (`0 9 * * 1-5`),
//!   a human phrase in English or French (`every weekday at 9am`,
//!   `toutes les 5 minutes`, `in 20m`, `demain à 8h`) or an ISO 8601 time — in
//!   a time zone, relative to `now`.
//! - [`Schedule::normalized`] is the text to store; [`Schedule::from_normalized`]
//!   with the same zone rebuilds an identical schedule, so after a restart
//!   `from_normalized(text, zone)?.next_after(last_fire_or_now)` recomputes
//!   `next_fire_at` exactly. Intervals carry their anchor in that text
//!   (`every 7200s from 2026-03-09T10:17:00Z`), so they keep their phase.
//! - [`Schedule::next_after`] gives the next fire strictly after an instant;
//!   [`Schedule::fire_times`] iterates them.
//!
//! DST follows Debian cron (see the `zone` module): a fixed local time skipped
//! by a spring-forward fires once at the end of the gap, one repeated at
//! fall-back fires on its first pass only, and wildcard-hour/minute schedules
//! fire by elapsed time, never twice for one instant.
//!
//! Cron is evaluated here rather than with croner: croner ORs the day fields
//! unless one is exactly `*` (Debian also ANDs them when one merely starts
//! with `*`, e.g. `*/2`), has its own DST handling, and its errors are
//! strings; per-field bitsets give Debian's semantics exactly, typed errors
//! naming field and token, and a `next_after` of a few hundred nanoseconds.
//! cronsim (Debian's rules) checks it in a differential test.

mod calendar;
mod cron;
mod describe;
mod error;
mod evaluate;
mod human;
mod once;
mod phrase;
mod zone;

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, SecondsFormat, Timelike, Utc};
use chrono_tz::Tz;

pub use cron::Cron;
pub use error::{Field, ScheduleError};
pub use zone::parse_zone;

/// Longest interval accepted: 100 years, far beyond any sensible use, and safe for arithmetic.
pub const MAX_INTERVAL: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Which of the three kinds of schedule this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduleKind {
    /// A recurring cron expression (human calendar phrases become cron too).
    Cron,
    /// A fixed interval: elapsed time from an anchor instant, or whole
    /// calendar days at a local time ([`Rule::EveryDays`]).
    Interval,
    /// A single instant.
    Once,
}

impl ScheduleKind {
    /// The lowercase name used in JSON and the CLI: `cron`, `interval`, `once`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleKind::Cron => "cron",
            ScheduleKind::Interval => "interval",
            ScheduleKind::Once => "once",
        }
    }
}

impl fmt::Display for ScheduleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The rule of a schedule, without its zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Fires whenever the local wall clock matches the expression.
    Cron(Cron),
    /// Fires at `anchor + k * every` for k = 1, 2, … (the anchor itself does not fire).
    Interval {
        /// The period, whole seconds, at least 1s.
        every: Duration,
        /// The instant the interval counts from (usually its creation), whole seconds.
        anchor: DateTime<Utc>,
    },
    /// Fires once at this instant (whole seconds).
    Once(DateTime<Utc>),
    /// Fires every `every` calendar days at a local time of day, starting on
    /// `first` (`every other day at 9am`). Unlike an interval it keeps the
    /// wall-clock time across DST changes (resolved like a fixed cron time).
    EveryDays {
        /// The step in calendar days, at least 1.
        every: u32,
        /// The local time of day, whole seconds.
        at: NaiveTime,
        /// The local date of the first fire.
        first: NaiveDate,
    },
}

/// A rule plus the IANA time zone it is read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    rule: Rule,
    zone: Tz,
}

/// Parses cron, a human phrase or an ISO time in `zone`, relative to `now`; see [`Schedule::parse`].
pub fn parse(expr: &str, zone: Tz, now: DateTime<Utc>) -> Result<Schedule, ScheduleError> {
    Schedule::parse(expr, zone, now)
}

/// Instants a schedule can store: years 1 to 9999, so that RFC 3339 text round-trips.
fn check_range(expr: &str, t: DateTime<Utc>) -> Result<(), ScheduleError> {
    if (zone::MIN_INSTANT..=zone::MAX_INSTANT).contains(&t.timestamp()) {
        Ok(())
    } else {
        Err(ScheduleError::TooLarge {
            expr: expr.to_string(),
            what: "the date",
            limit: "years 1 to 9999 are supported",
        })
    }
}

fn whole_seconds(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(t.timestamp(), 0).unwrap_or(t)
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Whether the text starts like an ISO 8601 date (`2026-03-09…`).
fn looks_like_iso(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
}

/// Whether the text starts like cron rather than a phrase: `@…`, `*…`, `?…` or a numeric field.
fn looks_like_cron(text: &str) -> bool {
    let first = text.split_whitespace().next().unwrap_or("");
    first.starts_with(['@', '*', '?'])
        || (!first.is_empty()
            && first
                .chars()
                .all(|c| c.is_ascii_digit() || "/,-".contains(c)))
}

impl Schedule {
    /// Parses what a person wrote: cron, a human phrase (English or French) or
    /// an ISO 8601 time, read in `zone`. `now` anchors intervals and resolves
    /// one-shots; a one-shot that is not after `now` is an error.
    pub fn parse(expr: &str, zone: Tz, now: DateTime<Utc>) -> Result<Schedule, ScheduleError> {
        let text = expr.trim();
        if text.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let now = whole_seconds(now);
        check_range(text, now)?;
        let rule = if looks_like_iso(text) {
            Rule::Once(once::parse_iso(text, zone)?)
        } else if looks_like_cron(text) {
            Rule::Cron(Cron::parse(text)?)
        } else {
            human::parse(text, zone, now)?
        };
        if let Rule::Once(at) | Rule::Interval { anchor: at, .. } = rule {
            check_range(text, at)?;
        }
        if let Rule::Once(at) = rule
            && at <= now
        {
            return Err(ScheduleError::InPast {
                expr: text.to_string(),
                at: rfc3339(at),
                now: rfc3339(now),
            });
        }
        Ok(Schedule { rule, zone })
    }

    /// Rebuilds a schedule from its [`normalized`](Schedule::normalized) text and
    /// zone. Unlike [`parse`](Schedule::parse) it needs no "now" and accepts a
    /// one-shot in the past (it then has no next fire).
    pub fn from_normalized(text: &str, zone: Tz) -> Result<Schedule, ScheduleError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let rule = if let Some(rest) = text.strip_prefix("every ") {
            if rest.contains(" at ") {
                human::parse_day_step(text, rest)?
            } else {
                let (every, anchor) = human::parse_anchored_interval(text, rest)?;
                check_range(text, anchor)?;
                Rule::Interval { every, anchor }
            }
        } else if looks_like_iso(text) {
            Rule::Once(once::parse_iso(text, zone)?)
        } else {
            Rule::Cron(Cron::parse(text)?)
        };
        Ok(Schedule { rule, zone })
    }

    /// A cron schedule (5, 6 or 7 fields, or an `@` macro) in `zone`.
    pub fn cron(expr: &str, zone: Tz) -> Result<Schedule, ScheduleError> {
        Ok(Schedule {
            rule: Rule::Cron(Cron::parse(expr)?),
            zone,
        })
    }

    /// An interval of elapsed time counted from `anchor` (both truncated to whole seconds).
    pub fn interval(
        every: Duration,
        anchor: DateTime<Utc>,
        zone: Tz,
    ) -> Result<Schedule, ScheduleError> {
        let expr = format!("every {}s", every.as_secs());
        check_range(&expr, anchor)?;
        if every.as_secs() == 0 {
            return Err(ScheduleError::ZeroInterval { expr });
        }
        if every > MAX_INTERVAL {
            return Err(ScheduleError::TooLarge {
                expr,
                what: "the interval",
                limit: "the longest is 100 years",
            });
        }
        Ok(Schedule {
            rule: Rule::Interval {
                every: Duration::from_secs(every.as_secs()),
                anchor: whole_seconds(anchor),
            },
            zone,
        })
    }

    /// A one-shot at `at` (truncated to whole seconds, years 1 to 9999); `zone` is used to describe it.
    pub fn once(at: DateTime<Utc>, zone: Tz) -> Result<Schedule, ScheduleError> {
        check_range(&rfc3339(at), at)?;
        Ok(Schedule {
            rule: Rule::Once(whole_seconds(at)),
            zone,
        })
    }

    /// Cron, interval or once.
    pub fn kind(&self) -> ScheduleKind {
        match self.rule {
            Rule::Cron(_) => ScheduleKind::Cron,
            Rule::Interval { .. } | Rule::EveryDays { .. } => ScheduleKind::Interval,
            Rule::Once(_) => ScheduleKind::Once,
        }
    }

    /// The rule, for callers that need its parts.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    /// The time zone the schedule is read in.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The canonical text to store: the normalized cron expression,
    /// `every <secs>s from <RFC 3339 anchor>`, or the RFC 3339 instant (UTC).
    pub fn normalized(&self) -> String {
        match &self.rule {
            Rule::Cron(cron) => cron.normalized(),
            Rule::Interval { every, anchor } => {
                format!("every {}s from {}", every.as_secs(), rfc3339(*anchor))
            }
            Rule::Once(at) => rfc3339(*at),
            Rule::EveryDays { every, at, first } => {
                let unit = if *every == 1 { "day" } else { "days" };
                format!(
                    "every {every} {unit} at {} from {}",
                    at.format("%H:%M:%S"),
                    first.format("%Y-%m-%d")
                )
            }
        }
    }

    /// A plain-English description, e.g. "at 09:00, Monday through Friday (America/New_York)".
    pub fn describe(&self) -> String {
        describe::describe(self)
    }

    /// The first fire strictly after `after`, or `None` when there is none
    /// (a past one-shot, a cron whose year field has run out, beyond year 9999).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let from = after.timestamp();
        let next = match &self.rule {
            Rule::Cron(cron) => cron.next_after_seconds(self.zone, from)?,
            Rule::Interval { every, anchor } => {
                let period = i64::try_from(every.as_secs()).ok()?.max(1);
                let start = anchor.timestamp();
                let k = if from < start {
                    1
                } else {
                    (from - start) / period + 1
                };
                let next = k.checked_mul(period)?.checked_add(start)?;
                // Like cron, nothing fires after year 9999.
                if next > zone::MAX_INSTANT {
                    return None;
                }
                next
            }
            Rule::Once(at) => {
                return (*at > after).then_some(*at);
            }
            Rule::EveryDays { every, at, first } => {
                self.next_day_step(from, i64::from(*every), *at, *first)?
            }
        };
        DateTime::from_timestamp(next, 0)
    }

    /// The first fire of a day step strictly after `from` (Unix seconds).
    fn next_day_step(&self, from: i64, every: i64, at: NaiveTime, first: NaiveDate) -> Option<i64> {
        let from = from.max(zone::MIN_INSTANT - 1);
        if from >= zone::MAX_INSTANT {
            return None;
        }
        let step = every.max(1);
        let first_day =
            calendar::days_from_civil(i64::from(first.year()), first.month(), first.day());
        let tod = i64::from(at.num_seconds_from_midnight());
        // A day early: a fall-back can put the previous local date's time after `from`.
        let from_day = (from + zone::offset_at(self.zone, from)).div_euclid(86_400) - 1;
        let start = from_day.max(first_day);
        let mut day = first_day + (start - first_day + step - 1).div_euclid(step) * step;
        // At most a few steps: each candidate day is at or after `from`'s local date.
        for _ in 0..4 {
            let t = zone::resolve_local(self.zone, day * 86_400 + tod);
            if t > from {
                return (t <= zone::MAX_INSTANT).then_some(t);
            }
            day += step;
        }
        None
    }

    /// The fire times strictly after `after`, in order.
    pub fn fire_times(&self, after: DateTime<Utc>) -> FireTimes<'_> {
        FireTimes {
            schedule: self,
            cursor: Some(after),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.normalized())
    }
}

/// Iterator over successive fire times of a schedule; see [`Schedule::fire_times`].
#[derive(Debug, Clone)]
pub struct FireTimes<'a> {
    schedule: &'a Schedule,
    cursor: Option<DateTime<Utc>>,
}

impl Iterator for FireTimes<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        let next = self.schedule.next_after(self.cursor?);
        self.cursor = next;
        next
    }
}

#[cfg(test)]
mod tests;
