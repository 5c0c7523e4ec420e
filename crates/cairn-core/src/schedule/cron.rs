//! Cron expressions: parsing into per-field bitsets, and their normalized text.
//!
//! Accepted syntax (Vixie/Debian cron plus the common extensions):
//! 5 fields `min hour dom mon dow`, 6 with seconds first, 7 with a year last;
//! `*`, `a`, `a-b`, `*/n`, `a/n` (from `a` to the field's end), `a-b/n`, lists `a,b`;
//! month and weekday names (`JAN`, `MON-FRI`, any case); Sunday is 0 or 7;
//! `?` as a synonym of `*` in the two day fields; `L`, `LW` and `nW` in the
//! day-of-month; `nL` (last weekday `n` of the month) and `n#k` (k-th weekday
//! `n`) in the day-of-week; `@hourly @daily @midnight @weekly @monthly
//! @yearly @annually`.
//!
//! Day matching follows Debian cron, not croner: when both day fields are
//! restricted a day matches if *either* matches, but a day field whose text
//! starts with `*` (or `?`) — including stepped ones like `*/2` — counts as
//! unrestricted for that rule (Debian's `DOM_STAR`/`DOW_STAR` flags), so the
//! two fields are then combined with AND. croner only treats a bare `*` that way.

use super::error::{Field, ScheduleError};

/// Smallest year a 7-field expression accepts.
pub(crate) const MIN_YEAR: u32 = 1970;
/// Largest year a 7-field expression accepts.
pub(crate) const MAX_YEAR: u32 = 2099;

/// One comma-separated term of a field, kept to render the normalized text and descriptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// `*` or `*/step`.
    Star { step: u32 },
    /// A single value.
    Value(u32),
    /// `start-end` or `start-end/step`.
    Range { start: u32, end: u32, step: u32 },
    /// `start/step`: from `start` to the end of the field.
    From { start: u32, step: u32 },
    /// `L` in the day-of-month: the last day of the month.
    Last,
    /// `LW` in the day-of-month: the last weekday (Mon-Fri) of the month.
    LastWeekday,
    /// `nW` in the day-of-month: the weekday nearest day `n`, within the month.
    Nearest(u32),
    /// `nL` in the day-of-week: the last weekday `n` of the month.
    LastOf(u32),
    /// `n#k` in the day-of-week: the k-th weekday `n` of the month.
    Nth(u32, u32),
}

/// A parsed cron expression: one bitset per field plus the Debian day and DST flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    /// Seconds, bit `s` set when second `s` matches.
    pub(crate) seconds: u64,
    /// Minutes, bit per minute.
    pub(crate) minutes: u64,
    /// Hours, bit per hour.
    pub(crate) hours: u32,
    /// Plain day-of-month values, bits 1-31.
    pub(crate) dom: u32,
    /// `L` present in the day-of-month.
    pub(crate) dom_last: bool,
    /// `LW` present in the day-of-month.
    pub(crate) dom_last_weekday: bool,
    /// `nW` days, bits 1-31.
    pub(crate) dom_nearest: u32,
    /// Months, bits 1-12.
    pub(crate) months: u16,
    /// Plain weekdays, bits 0-6 (Sunday = 0).
    pub(crate) dow: u8,
    /// `n#k`: for weekday `n`, bit `k` (1-5).
    pub(crate) dow_nth: [u8; 7],
    /// `nL`: weekdays, bits 0-6.
    pub(crate) dow_last: u8,
    /// Years as bits of `year - MIN_YEAR`; `None` when there is no year field (or it is `*`).
    pub(crate) years: Option<[u64; 3]>,
    /// The day-of-month text starts with `*` or `?` (Debian `DOM_STAR`).
    pub(crate) dom_star: bool,
    /// The day-of-week text starts with `*` or `?` (Debian `DOW_STAR`).
    pub(crate) dow_star: bool,
    /// Neither minute nor hour starts with `*`: a fixed local time, which gets
    /// Debian's DST treatment (see the `zone` module).
    pub(crate) fixed_time: bool,
    /// The terms of each field, seconds first, year last (empty when absent);
    /// boxed to keep `Cron` small, as it is only read to render text.
    pub(crate) items: Box<[Vec<Item>; 7]>,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Index of each field in `Cron::items`.
const ORDER: [Field; 7] = [
    Field::Second,
    Field::Minute,
    Field::Hour,
    Field::DayOfMonth,
    Field::Month,
    Field::DayOfWeek,
    Field::Year,
];

fn expected(field: Field) -> &'static str {
    match field {
        Field::Second | Field::Minute => "0-59, *, a-b, */n, a/n or a list",
        Field::Hour => "0-23, *, a-b, */n, a/n or a list",
        Field::DayOfMonth => "1-31, *, ?, L, LW, nW, a-b, */n, a/n or a list",
        Field::Month => "1-12 or JAN-DEC, *, a-b, */n, a/n or a list",
        Field::DayOfWeek => "0-7 or SUN-SAT, *, ?, nL, n#k, a-b, */n, a/n or a list",
        Field::Year => "1970-2099, *, a-b, */n, a/n or a list",
    }
}

/// Expands a macro to its 5-field form, or `None` when it is not a known macro.
fn expand_macro(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "@hourly" => "0 * * * *",
        "@daily" | "@midnight" => "0 0 * * *",
        "@weekly" => "0 0 * * 0",
        "@monthly" => "0 0 1 * *",
        "@yearly" | "@annually" => "0 0 1 1 *",
        _ => return None,
    })
}

struct FieldParser<'a> {
    expr: &'a str,
    field: Field,
    /// The expression as parsed (uppercased, so names match in any case)…
    upper: &'a str,
    /// …and as written, byte for byte the same length, to quote tokens in errors.
    original: &'a str,
}

impl FieldParser<'_> {
    /// A token (a slice of `upper`) as the person wrote it.
    fn shown(&self, token: &str) -> String {
        let start = (token.as_ptr() as usize).wrapping_sub(self.upper.as_ptr() as usize);
        self.original
            .get(start..start.saturating_add(token.len()))
            .filter(|_| start <= self.upper.len())
            .unwrap_or(token)
            .to_string()
    }

    fn invalid(&self, token: &str) -> ScheduleError {
        ScheduleError::InvalidToken {
            expr: self.expr.to_string(),
            field: self.field,
            token: self.shown(token),
            expected: expected(self.field),
        }
    }

    fn out_of_range(&self, label: &str, value: &str, min: u32, max: u32) -> ScheduleError {
        ScheduleError::OutOfRange {
            expr: self.expr.to_string(),
            field: self.field,
            value: format!("{label}{}", self.shown(value)),
            min,
            max,
        }
    }

    /// A number in `min..=max`, or a name for months and weekdays.
    fn value(&self, text: &str) -> Result<u32, ScheduleError> {
        let names: &[&str] = match self.field {
            Field::Month => &MONTHS,
            Field::DayOfWeek => &WEEKDAYS,
            _ => &[],
        };
        if let Some(pos) = names.iter().position(|n| *n == text) {
            let pos = pos as u32;
            return Ok(if self.field == Field::Month {
                pos + 1
            } else {
                pos
            });
        }
        self.number(text, self.field.min(), self.field.max())
    }

    fn number(&self, text: &str, min: u32, max: u32) -> Result<u32, ScheduleError> {
        self.labeled_number(text, min, max, "")
    }

    /// A number in `min..=max`; `label` prefixes the value in errors (`step 0`).
    fn labeled_number(
        &self,
        text: &str,
        min: u32,
        max: u32,
        label: &str,
    ) -> Result<u32, ScheduleError> {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.invalid(text));
        }
        match text.parse::<u32>() {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(self.out_of_range(label, text, min, max)),
        }
    }

    fn term(&self, term: &str) -> Result<Item, ScheduleError> {
        if term.is_empty() {
            return Err(self.invalid(term));
        }
        match self.field {
            Field::DayOfMonth => match term {
                "L" => return Ok(Item::Last),
                "LW" => return Ok(Item::LastWeekday),
                _ => {
                    if let Some(day) = term.strip_suffix('W') {
                        return Ok(Item::Nearest(self.number(day, 1, 31)?));
                    }
                }
            },
            Field::DayOfWeek => {
                if let Some((day, nth)) = term.split_once('#') {
                    let day = self.value(day)?;
                    return Ok(Item::Nth(day, self.labeled_number(nth, 1, 5, "#")?));
                }
                if term == "L" {
                    return Err(self.invalid(term));
                }
                if let Some(day) = term.strip_suffix('L') {
                    return Ok(Item::LastOf(self.value(day)?));
                }
            }
            _ => {}
        }
        let (base, step) = match term.split_once('/') {
            Some((base, step)) => {
                let span = self.field.max() - self.field.min() + 1;
                (base, Some(self.labeled_number(step, 1, span, "step ")?))
            }
            None => (term, None),
        };
        let star_ok = matches!(self.field, Field::DayOfMonth | Field::DayOfWeek);
        if base == "*" || (base == "?" && star_ok) {
            return Ok(Item::Star {
                step: step.unwrap_or(1),
            });
        }
        if let Some((start_text, end_text)) = base.split_once('-') {
            let start = self.value(start_text)?;
            let end = self.value(end_text)?;
            if start > end {
                return Err(ScheduleError::ReversedRange {
                    expr: self.expr.to_string(),
                    field: self.field,
                    start: self.shown(start_text),
                    end: self.shown(end_text),
                });
            }
            return Ok(Item::Range {
                start,
                end,
                step: step.unwrap_or(1),
            });
        }
        let value = self.value(base)?;
        Ok(match step {
            Some(step) => Item::From { start: value, step },
            None => Item::Value(value),
        })
    }

    fn items(&self, text: &str) -> Result<Vec<Item>, ScheduleError> {
        text.split(',').map(|term| self.term(term)).collect()
    }
}

/// The values an item selects among plain values (special day items select none here).
fn plain_values(item: Item, field: Field) -> Vec<u32> {
    let (min, max) = (field.min(), field.max());
    let stepped = |start: u32, end: u32, step: u32| {
        (start..=end)
            .step_by(step.max(1) as usize)
            .collect::<Vec<_>>()
    };
    match item {
        Item::Star { step } => stepped(min, max, step),
        Item::Value(v) => vec![v],
        Item::Range { start, end, step } => stepped(start, end, step),
        Item::From { start, step } => stepped(start, max, step),
        _ => Vec::new(),
    }
}

fn bits(items: &[Item], field: Field) -> u128 {
    let mut set = 0u128;
    for &item in items {
        for v in plain_values(item, field) {
            // Sunday is both 0 and 7; fold it so each weekday has one bit.
            let v = if field == Field::DayOfWeek { v % 7 } else { v };
            set |= 1u128 << v;
        }
    }
    set
}

impl Cron {
    /// Parses a 5-, 6- or 7-field expression or an `@` macro.
    pub fn parse(expr: &str) -> Result<Cron, ScheduleError> {
        let trimmed = expr.trim();
        if trimmed.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let text = if trimmed.starts_with('@') {
            expand_macro(trimmed).ok_or_else(|| ScheduleError::UnknownMacro {
                expr: trimmed.to_string(),
                token: trimmed.to_string(),
            })?
        } else {
            trimmed
        };
        let upper = text.to_ascii_uppercase();
        let parts: Vec<&str> = upper.split_whitespace().collect();
        let (second, rest, year) = match parts.len() {
            5 => ("0", &parts[..], None),
            6 => (parts[0], &parts[1..], None),
            7 => (parts[0], &parts[1..6], Some(parts[6])),
            count => {
                return Err(ScheduleError::FieldCount {
                    expr: trimmed.to_string(),
                    count,
                });
            }
        };
        let texts = [
            second,
            rest[0],
            rest[1],
            rest[2],
            rest[3],
            rest[4],
            year.unwrap_or(""),
        ];
        let mut items: [Vec<Item>; 7] = Default::default();
        for (slot, (&field, &field_text)) in items.iter_mut().zip(ORDER.iter().zip(texts.iter())) {
            if field == Field::Year && field_text.is_empty() {
                continue;
            }
            let parser = FieldParser {
                expr: trimmed,
                field,
                upper: &upper,
                original: text,
            };
            *slot = parser.items(field_text)?;
        }
        // A year field of `*` selects every year: the same as no year field.
        if items[6] == [Item::Star { step: 1 }] {
            items[6].clear();
        }
        let cron = Cron::from_items(items, texts[1], texts[2], texts[3], texts[5]);
        cron.check_satisfiable(trimmed)?;
        Ok(cron)
    }

    fn from_items(items: [Vec<Item>; 7], minute: &str, hour: &str, dom: &str, dow: &str) -> Cron {
        let starts_star = |t: &str| t.starts_with('*') || t.starts_with('?');
        let mut dow_nth = [0u8; 7];
        let mut dow_last = 0u8;
        let mut dom_last = false;
        let mut dom_last_weekday = false;
        let mut dom_nearest = 0u32;
        for &item in &items[3] {
            match item {
                Item::Last => dom_last = true,
                Item::LastWeekday => dom_last_weekday = true,
                Item::Nearest(n) => dom_nearest |= 1 << n,
                _ => {}
            }
        }
        for &item in &items[5] {
            match item {
                Item::Nth(day, n) => dow_nth[(day % 7) as usize] |= 1 << n,
                Item::LastOf(day) => dow_last |= 1 << (day % 7),
                _ => {}
            }
        }
        let years = if items[6].is_empty() {
            None
        } else {
            let mut set = [0u64; 3];
            for &item in &items[6] {
                for y in plain_values(item, Field::Year) {
                    let i = (y - MIN_YEAR) as usize;
                    set[i / 64] |= 1 << (i % 64);
                }
            }
            Some(set)
        };
        Cron {
            seconds: bits(&items[0], Field::Second) as u64,
            minutes: bits(&items[1], Field::Minute) as u64,
            hours: bits(&items[2], Field::Hour) as u32,
            dom: bits(&items[3], Field::DayOfMonth) as u32,
            dom_last,
            dom_last_weekday,
            dom_nearest,
            months: bits(&items[4], Field::Month) as u16,
            dow: bits(&items[5], Field::DayOfWeek) as u8,
            dow_nth,
            dow_last,
            years,
            dom_star: starts_star(dom),
            dow_star: starts_star(dow),
            fixed_time: !minute.starts_with('*') && !hour.starts_with('*'),
            items: Box::new(items),
        }
    }

    /// Rejects expressions that no date can ever match (`0 0 30 2 *`).
    fn check_satisfiable(&self, expr: &str) -> Result<(), ScheduleError> {
        // The Gregorian calendar repeats every 400 years, weekdays included, so a
        // day pattern that matches nothing in 400 years never matches.
        let start_year = match self.years {
            Some(_) => i64::from(MIN_YEAR),
            None => 2000,
        };
        if self.first_date(start_year, 1, 1, 401 * 12).is_some() {
            return Ok(());
        }
        Err(ScheduleError::NeverFires {
            expr: expr.to_string(),
            reason: "no date matches its day-of-month, month, day-of-week and year fields"
                .to_string(),
        })
    }

    /// The normalized text: numbers instead of names, `?` as `*`, no seconds field
    /// when it is `0`, no year field when absent; stable under re-parsing.
    pub fn normalized(&self) -> String {
        let render = |items: &[Item]| {
            items
                .iter()
                .map(|item| match *item {
                    Item::Star { step: 1 } => "*".to_string(),
                    Item::Star { step } => format!("*/{step}"),
                    Item::Value(v) => v.to_string(),
                    Item::Range {
                        start,
                        end,
                        step: 1,
                    } => format!("{start}-{end}"),
                    Item::Range { start, end, step } => format!("{start}-{end}/{step}"),
                    Item::From { start, step } => format!("{start}/{step}"),
                    Item::Last => "L".to_string(),
                    Item::LastWeekday => "LW".to_string(),
                    Item::Nearest(n) => format!("{n}W"),
                    Item::LastOf(d) => format!("{d}L"),
                    Item::Nth(d, n) => format!("{d}#{n}"),
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        let with_year = !self.items[6].is_empty();
        let with_seconds = with_year || self.items[0] != [Item::Value(0)];
        let first = if with_seconds { 0 } else { 1 };
        let last = if with_year { 7 } else { 6 };
        self.items[first..last]
            .iter()
            .map(|items| render(items))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether the minute and hour fields are both fixed (neither starts with `*`),
    /// which selects Debian's DST treatment for fixed local times.
    pub fn is_fixed_time(&self) -> bool {
        self.fixed_time
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(expr: &str) -> String {
        Cron::parse(expr).unwrap().normalized()
    }

    #[test]
    fn normalizes_names_macros_and_field_counts() {
        assert_eq!(norm("0 9 * * MON-FRI"), "0 9 * * 1-5");
        assert_eq!(norm("0 9 * * mon-fri"), "0 9 * * 1-5");
        assert_eq!(norm("0 0 9 * jan,Jul ?"), "0 9 * 1,7 *");
        assert_eq!(norm("@daily"), "0 0 * * *");
        assert_eq!(norm("@MIDNIGHT"), "0 0 * * *");
        assert_eq!(norm("@hourly"), "0 * * * *");
        assert_eq!(norm("@weekly"), "0 0 * * 0");
        assert_eq!(norm("@monthly"), "0 0 1 * *");
        assert_eq!(norm("@yearly"), "0 0 1 1 *");
        assert_eq!(norm("@annually"), "0 0 1 1 *");
        assert_eq!(norm("*/10 * * * * *"), "*/10 * * * * *");
        assert_eq!(norm("0 0 12 * * * 2030"), "0 0 12 * * * 2030");
        assert_eq!(norm("0 0 12 * * * *"), "0 12 * * *");
        assert_eq!(norm("0 0 L * 5L"), "0 0 L * 5L");
        assert_eq!(norm("0 0 15W,LW * MON#2"), "0 0 15W,LW * 1#2");
        assert_eq!(norm("5/15 1-10/3 * * *"), "5/15 1-10/3 * * *");
        assert_eq!(norm("*/1 * * * */1"), "* * * * *");
        for expr in [
            "0 9 * * 1-5",
            "*/10 * * * * *",
            "0 0 L * 5L",
            "0 0 12 * * * 2030",
        ] {
            assert_eq!(norm(&norm(expr)), norm(expr));
        }
    }

    #[test]
    fn bitsets_follow_vixie_rules() {
        let c = Cron::parse("*/15 9-17 * * 1-7").unwrap();
        assert_eq!(c.minutes, 1 | 1 << 15 | 1 << 30 | 1 << 45);
        assert_eq!(c.hours, 0b11_1111_1110_0000_0000);
        assert_eq!(c.dow, 0x7f, "7 is Sunday");
        let c = Cron::parse("0 0 * * */2").unwrap();
        assert_eq!(c.dow, 0b101_0101);
        let c = Cron::parse("0 0 * * 1/2").unwrap();
        assert_eq!(c.dow, 0b010_1011, "1,3,5,7 -> Mon, Wed, Fri, Sun");
        assert!(c.dom_star && !c.dow_star);
        assert!(c.fixed_time);
        assert!(!Cron::parse("*/5 9 * * *").unwrap().fixed_time);
        assert!(!Cron::parse("0 * * * *").unwrap().fixed_time);
        assert!(Cron::parse("0 0-23 * * *").unwrap().fixed_time);
    }

    #[test]
    fn errors_name_field_token_and_range() {
        let err = |e: &str| Cron::parse(e).unwrap_err().to_string();
        assert!(
            err("0 25 * * *").contains("hour 25 out of range 0-23"),
            "{}",
            err("0 25 * * *")
        );
        assert!(err("60 * * * *").contains("minute 60 out of range 0-59"));
        assert!(err("0 0 0 * *").contains("day-of-month 0 out of range 1-31"));
        assert!(err("0 0 * 13 *").contains("month 13 out of range 1-12"));
        assert!(err("0 0 * * 8").contains("day-of-week 8 out of range 0-7"));
        assert!(err("0 0 * * MON#6").contains("day-of-week #6 out of range 1-5"));
        assert!(err("0 0 0 * * * 1969").contains("year 1969 out of range 1970-2099"));
        assert!(err("*/0 * * * *").contains("minute step 0 out of range 1-60"));
        assert!(err("0 0 * * FRI-MON").contains("range FRI-MON is reversed"));
        assert!(err("0 0 * * FOO").contains("day-of-week \"FOO\" is not valid"));
        assert!(err("0 9 * * * junk").contains("day-of-week \"junk\" is not valid"));
        assert!(err("0 0 * * fri-mon").contains("range fri-mon is reversed"));
        assert!(err("0 0 * * Mon#9").contains("day-of-week #9 out of range 1-5"));
        assert!(err("0 0 * * L").contains("day-of-week \"L\""));
        assert!(err("0 ? * * *").contains("hour \"?\""));
        assert!(err("0 0 * *").contains("4 fields"));
        assert!(err("0 0 * * * * * *").contains("8 fields"));
        assert!(err("1,,2 * * * *").contains("minute \"\""));
        assert!(err("@reboot").contains("unknown macro \"@reboot\""));
        assert!(err("0 0 30 2 *").contains("never fires"));
        assert!(err("0 0 31 4,6,9,11 *").contains("never fires"));
        assert!(err("0 0 * * * * 2020-2019").contains("reversed"));
        assert!(err("99999999999 * * * *").contains("out of range"));
        assert_eq!(Cron::parse("  "), Err(ScheduleError::Empty));
    }

    #[test]
    fn rare_but_possible_days_are_accepted() {
        // OR rule: any Monday in February fires even though the 30th never exists.
        assert!(Cron::parse("0 0 30 2 1").is_ok());
        // Fifth Friday of February: leap years starting on a Friday.
        assert!(Cron::parse("0 0 * 2 5#5").is_ok());
        assert!(Cron::parse("0 0 29 2 *").is_ok());
        assert!(Cron::parse("0 0 31W 4 *").is_err(), "April has no 31st");
    }
}
