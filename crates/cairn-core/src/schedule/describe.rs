//! Plain-English descriptions of schedules, e.g. "at 09:00, Monday through Friday (America/New_York)".

use std::time::Duration;

use chrono::Timelike;

use super::cron::{Cron, Item};
use super::{Rule, Schedule, rfc3339};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const ORDINALS: [&str; 6] = ["", "first", "second", "third", "fourth", "fifth"];

/// Describes any schedule.
pub(crate) fn describe(schedule: &Schedule) -> String {
    let zone = schedule.zone();
    match schedule.rule() {
        Rule::Cron(cron) => format!("{} ({})", describe_cron(cron), zone.name()),
        Rule::Interval { every, anchor } => {
            format!("{} (from {})", every_text(*every), rfc3339(*anchor))
        }
        Rule::EveryDays { every, at, first } => {
            let days = if *every == 1 {
                "every day".to_string()
            } else {
                format!("every {every} days")
            };
            format!(
                "{days} at {}, from {} ({})",
                at.format(if at.second() == 0 {
                    "%H:%M"
                } else {
                    "%H:%M:%S"
                }),
                first.format("%Y-%m-%d"),
                zone.name()
            )
        }
        Rule::Once(at) => {
            let local = at.with_timezone(&zone);
            let format = if local.second() == 0 {
                "%Y-%m-%d %H:%M"
            } else {
                "%Y-%m-%d %H:%M:%S"
            };
            format!("once at {} ({})", local.format(format), zone.name())
        }
    }
}

/// "every 2 hours", "every 90 minutes", "every day", "every 45 seconds".
fn every_text(every: Duration) -> String {
    let secs = every.as_secs();
    let (n, unit) = [
        (604_800, "week"),
        (86_400, "day"),
        (3600, "hour"),
        (60, "minute"),
    ]
    .iter()
    .find(|(size, _)| secs.is_multiple_of(*size))
    .map(|&(size, unit)| (secs / size, unit))
    .unwrap_or((secs, "second"));
    if n == 1 {
        format!("every {unit}")
    } else {
        format!("every {n} {unit}s")
    }
}

/// Joins phrases as "a", "a and b", "a, b and c".
fn join_and(parts: &[String]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The values of a field when it is a plain list of single values.
fn plain_values(items: &[Item]) -> Option<Vec<u32>> {
    items
        .iter()
        .map(|item| match item {
            Item::Value(v) => Some(*v),
            _ => None,
        })
        .collect()
}

/// A generic rendering of one item, with `name` for values.
fn item_text(item: &Item, name: &dyn Fn(u32) -> String) -> String {
    match *item {
        Item::Star { step } => format!("every {step}"),
        Item::Value(v) => name(v),
        Item::Range {
            start,
            end,
            step: 1,
        } => format!("{} through {}", name(start), name(end)),
        Item::Range { start, end, step } => {
            format!("every {step} from {} through {}", name(start), name(end))
        }
        Item::From { start, step } => format!("every {step} from {}", name(start)),
        Item::Last => "the last day".to_string(),
        Item::LastWeekday => "the last weekday".to_string(),
        Item::Nearest(d) => format!("the weekday nearest day {d}"),
        Item::LastOf(d) => format!("the last {} of the month", WEEKDAYS[(d % 7) as usize]),
        Item::Nth(d, n) => format!(
            "the {} {} of the month",
            ORDINALS[n as usize % 6],
            WEEKDAYS[(d % 7) as usize]
        ),
    }
}

fn list_text(items: &[Item], name: &dyn Fn(u32) -> String) -> String {
    join_and(&items.iter().map(|i| item_text(i, name)).collect::<Vec<_>>())
}

fn is_any(items: &[Item]) -> bool {
    items == [Item::Star { step: 1 }]
}

fn describe_cron(cron: &Cron) -> String {
    let mut parts = vec![time_text(cron)];
    parts.extend(day_text(cron));
    let months = &cron.items[4];
    if !is_any(months) {
        let name = |m: u32| MONTHS[(m as usize + 11) % 12].to_string();
        parts.push(format!("in {}", list_text(months, &name)));
    }
    let years = &cron.items[6];
    if !years.is_empty() {
        parts.push(format!("in {}", list_text(years, &|y| y.to_string())));
    }
    parts.join(", ")
}

fn time_text(cron: &Cron) -> String {
    let [seconds, minutes, hours, ..] = &*cron.items;
    let second_zero = seconds == &[Item::Value(0)];
    if let (Some(ss), Some(ms), Some(hs)) = (
        plain_values(seconds),
        plain_values(minutes),
        plain_values(hours),
    ) && ss.len() * ms.len() * hs.len() <= 6
    {
        let mut times = Vec::new();
        for &h in &hs {
            for &m in &ms {
                for &s in &ss {
                    times.push((h, m, s));
                }
            }
        }
        times.sort_unstable();
        times.dedup();
        let text: Vec<String> = times
            .iter()
            .map(|&(h, m, s)| {
                if second_zero {
                    format!("{h:02}:{m:02}")
                } else {
                    format!("{h:02}:{m:02}:{s:02}")
                }
            })
            .collect();
        return format!("at {}", join_and(&text));
    }
    let mut out = Vec::new();
    if !second_zero {
        out.push(match seconds.as_slice() {
            [Item::Star { step: 1 }] => "every second".to_string(),
            [Item::Star { step }] => format!("every {step} seconds"),
            _ => format!("at second {}", list_text(seconds, &|s| s.to_string())),
        });
    }
    let minute_values = plain_values(minutes);
    match (minutes.as_slice(), hours.as_slice(), &minute_values) {
        (_, [Item::Star { step: 1 }], Some(ms)) => {
            let marks: Vec<String> = ms.iter().map(|m| format!(":{m:02}")).collect();
            out.push(format!("every hour at {}", join_and(&marks)));
            return out.join(", ");
        }
        (_, [Item::Star { step }], Some(ms)) => {
            let marks: Vec<String> = ms.iter().map(|m| format!(":{m:02}")).collect();
            out.push(format!("every {step} hours at {}", join_and(&marks)));
            return out.join(", ");
        }
        ([Item::Star { step: 1 }], _, _) if second_zero => out.push("every minute".to_string()),
        ([Item::Star { step: 1 }], _, _) => {}
        ([Item::Star { step }], _, _) => out.push(format!("every {step} minutes")),
        _ => out.push(format!(
            "at minute {}",
            list_text(minutes, &|m| m.to_string())
        )),
    }
    match hours.as_slice() {
        [Item::Star { step: 1 }] => {}
        [
            Item::Range {
                start,
                end,
                step: 1,
            },
        ] => out.push(format!("between {start:02}:00 and {end:02}:59")),
        _ => out.push(format!(
            "during hour {}",
            list_text(hours, &|h| h.to_string())
        )),
    }
    out.join(", ")
}

fn day_text(cron: &Cron) -> Option<String> {
    let dom = &cron.items[3];
    let dow = &cron.items[5];
    let dom_text = (!is_any(dom)).then(|| match dom.as_slice() {
        [Item::Star { step }] => format!("every {step} days of the month from day 1"),
        _ => {
            let name = |d: u32| format!("day {d}");
            format!("on {} of the month", list_text(dom, &name))
        }
    });
    let dow_text = (!is_any(dow)).then(|| {
        let name = |d: u32| WEEKDAYS[(d % 7) as usize].to_string();
        if let Some(mut days) = plain_values(dow) {
            // People read weeks from Monday: "on Saturday and Sunday".
            days.sort_by_key(|d| (d + 6) % 7);
            days.dedup_by_key(|d| *d % 7);
            return format!(
                "on {}",
                join_and(&days.into_iter().map(name).collect::<Vec<_>>())
            );
        }
        match dow.as_slice() {
            [Item::Range { step: 1, .. }] => list_text(dow, &name),
            _ => format!("on {}", list_text(dow, &name)),
        }
    });
    match (dom_text, dow_text) {
        (None, None) => None,
        (Some(text), None) | (None, Some(text)) => Some(text),
        // Debian: a day field starting with `*` makes the two fields AND, otherwise OR.
        (Some(d), Some(w)) if cron.dom_star || cron.dow_star => Some(format!("{d}, if also {w}")),
        (Some(d), Some(w)) => Some(format!("{d} or {w}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    fn cron(expr: &str, zone: chrono_tz::Tz) -> String {
        Schedule::cron(expr, zone).unwrap().describe()
    }

    #[test]
    fn describes_common_shapes() {
        let ny = chrono_tz::America::New_York;
        let utc = chrono_tz::UTC;
        assert_eq!(
            cron("0 9 * * 1-5", ny),
            "at 09:00, Monday through Friday (America/New_York)"
        );
        assert_eq!(cron("30 8 * * *", utc), "at 08:30 (UTC)");
        assert_eq!(cron("0 9,17 * * *", utc), "at 09:00 and 17:00 (UTC)");
        assert_eq!(cron("*/15 * * * *", utc), "every 15 minutes (UTC)");
        assert_eq!(cron("* * * * *", utc), "every minute (UTC)");
        assert_eq!(cron("0 * * * *", utc), "every hour at :00 (UTC)");
        assert_eq!(cron("0 */2 * * *", utc), "every 2 hours at :00 (UTC)");
        assert_eq!(
            cron("*/10 9-17 * * 1-5", utc),
            "every 10 minutes, between 09:00 and 17:59, Monday through Friday (UTC)"
        );
        assert_eq!(cron("*/30 * * * * *", utc), "every 30 seconds (UTC)");
        assert_eq!(
            cron("0 8 1 * *", utc),
            "at 08:00, on day 1 of the month (UTC)"
        );
        assert_eq!(
            cron("0 0 L * *", utc),
            "at 00:00, on the last day of the month (UTC)"
        );
        assert_eq!(
            cron("0 10 * * 1#2", utc),
            "at 10:00, on the second Monday of the month (UTC)"
        );
        assert_eq!(
            cron("0 10 * * 5L", utc),
            "at 10:00, on the last Friday of the month (UTC)"
        );
        assert_eq!(
            cron("0 0 1 * 1", utc),
            "at 00:00, on day 1 of the month or on Monday (UTC)"
        );
        assert_eq!(
            cron("0 0 */2 * 1", utc),
            "at 00:00, every 2 days of the month from day 1, if also on Monday (UTC)"
        );
        assert_eq!(
            cron("0 0 1 1-3 * ", utc),
            "at 00:00, on day 1 of the month, in January through March (UTC)"
        );
        assert_eq!(
            cron("0 0 12 1 1 * 2030", utc),
            "at 12:00, on day 1 of the month, in January, in 2030 (UTC)"
        );
        assert_eq!(
            cron("15 7 * * 1,3,5", utc),
            "at 07:15, on Monday, Wednesday and Friday (UTC)"
        );
        assert_eq!(
            cron("0 10 * * 0,6", utc),
            "at 10:00, on Saturday and Sunday (UTC)"
        );
    }

    #[test]
    fn describes_intervals_and_one_shots() {
        let anchor = DateTime::parse_from_rfc3339("2026-03-09T10:17:00Z")
            .unwrap()
            .to_utc();
        let ny = chrono_tz::America::New_York;
        let every = |s| {
            Schedule::interval(Duration::from_secs(s), anchor, ny)
                .unwrap()
                .describe()
        };
        assert_eq!(every(7200), "every 2 hours (from 2026-03-09T10:17:00Z)");
        assert_eq!(every(5400), "every 90 minutes (from 2026-03-09T10:17:00Z)");
        assert_eq!(every(30), "every 30 seconds (from 2026-03-09T10:17:00Z)");
        assert_eq!(every(86_400), "every day (from 2026-03-09T10:17:00Z)");
        assert_eq!(every(60), "every minute (from 2026-03-09T10:17:00Z)");
        let at = DateTime::parse_from_rfc3339("2026-03-09T13:00:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(
            Schedule::once(at, ny).unwrap().describe(),
            "once at 2026-03-09 09:00 (America/New_York)"
        );
    }
}
