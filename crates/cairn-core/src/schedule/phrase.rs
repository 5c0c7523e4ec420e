//! Building blocks of human phrases: a token cursor with precise errors, times
//! of day (`9am`, `09:30`, `10h30`, `noon`, `midi`), durations (`5m`,
//! `2 hours and 15 minutes`, `une heure`), weekday names and day ordinals, in
//! English and French.

use super::error::{Field, ScheduleError};
use crate::duration::{self, DurationError};

/// A wall-clock time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeOfDay {
    /// Hour, 0-23.
    pub(crate) hour: u32,
    /// Minute, 0-59.
    pub(crate) minute: u32,
    /// Second, 0-59.
    pub(crate) second: u32,
}

impl TimeOfDay {
    /// Seconds since midnight.
    pub(crate) fn seconds(self) -> u32 {
        self.hour * 3600 + self.minute * 60 + self.second
    }
}

/// Lowercased words of a phrase, with commas as their own tokens, and a cursor.
pub(crate) struct Tokens<'a> {
    expr: &'a str,
    words: Vec<String>,
    /// For each token, the index of the whitespace-separated word of `expr` it came from.
    word_of: Vec<usize>,
    pos: usize,
}

impl<'a> Tokens<'a> {
    /// Splits a phrase into lowercase tokens; `expr` is kept for error messages.
    pub(crate) fn new(expr: &'a str) -> Tokens<'a> {
        let lowered = expr.to_lowercase().replace(['’', '‘'], "'");
        let mut words = Vec::new();
        let mut word_of = Vec::new();
        for (index, raw) in lowered.split_whitespace().enumerate() {
            let mut parts = raw.split(',').peekable();
            while let Some(part) = parts.next() {
                if !part.is_empty() {
                    words.push(part.to_string());
                    word_of.push(index);
                }
                if parts.peek().is_some() {
                    words.push(",".to_string());
                    word_of.push(index);
                }
            }
        }
        Tokens {
            expr,
            words,
            word_of,
            pos: 0,
        }
    }

    /// The whole phrase, as written.
    pub(crate) fn expr(&self) -> &'a str {
        self.expr
    }

    /// The current token, if any.
    pub(crate) fn peek(&self) -> Option<&str> {
        self.words.get(self.pos).map(String::as_str)
    }

    /// The token after the current one, if any.
    pub(crate) fn peek2(&self) -> Option<&str> {
        self.words.get(self.pos + 1).map(String::as_str)
    }

    /// The cursor position, to [`rewind`](Tokens::rewind) to.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// Moves the cursor back to a saved position.
    pub(crate) fn rewind(&mut self, pos: usize) {
        self.pos = pos.min(self.words.len());
    }

    /// Takes the current token.
    pub(crate) fn next(&mut self) -> Option<String> {
        let word = self.words.get(self.pos).cloned();
        if word.is_some() {
            self.pos += 1;
        }
        word
    }

    /// Takes the current token when it is one of `words`.
    pub(crate) fn eat(&mut self, words: &[&str]) -> bool {
        match self.peek() {
            Some(w) if words.contains(&w) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// Takes the current token when it is one of `words`, or fails naming what was expected.
    pub(crate) fn expect(&mut self, words: &[&str], expected: &str) -> Result<(), ScheduleError> {
        if self.eat(words) {
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    /// Whether every token has been used.
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.words.len()
    }

    /// Fails on trailing tokens: nothing is accepted silently.
    pub(crate) fn finish(&self) -> Result<(), ScheduleError> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.unexpected("the end of the phrase"))
        }
    }

    /// An error naming the current token (or the end of input) and what was expected.
    /// Once a whole word has been read, the error says what was understood
    /// (the words before the offending one) and what was not (the rest).
    pub(crate) fn unexpected(&self, expected: &str) -> ScheduleError {
        let word = self.word_of.get(self.pos).copied().unwrap_or(0);
        if self.peek().is_some() && word > 0 {
            let raw: Vec<&str> = self.expr.split_whitespace().collect();
            return ScheduleError::NotUnderstood {
                expr: self.expr.to_string(),
                understood: raw[..word.min(raw.len())].join(" "),
                rest: raw[word.min(raw.len())..].join(" "),
                word: word + 1,
                expected: expected.to_string(),
            };
        }
        match self.peek() {
            Some(token) => ScheduleError::Unexpected {
                expr: self.expr.to_string(),
                token: token.to_string(),
                expected: expected.to_string(),
            },
            None => ScheduleError::Incomplete {
                expr: self.expr.to_string(),
                expected: expected.to_string(),
            },
        }
    }

    /// An out-of-range error for this phrase.
    pub(crate) fn out_of_range(
        &self,
        field: Field,
        value: u32,
        min: u32,
        max: u32,
    ) -> ScheduleError {
        ScheduleError::OutOfRange {
            expr: self.expr.to_string(),
            field,
            value: value.to_string(),
            min,
            max,
        }
    }

    /// Parses a time of day: `9`, `9am`, `9 pm`, `09:30`, `9:30:15`, `10h30`, `9h`, `noon`, `midi`…
    pub(crate) fn time_of_day(&mut self) -> Result<TimeOfDay, ScheduleError> {
        const EXPECTED: &str = "a time such as 9am, 09:30, 17:00, 10h30 or noon";
        let Some(word) = self.peek().map(str::to_string) else {
            return Err(self.unexpected(EXPECTED));
        };
        let named = match word.as_str() {
            "noon" | "midday" | "midi" => Some(12),
            "midnight" | "minuit" => Some(0),
            _ => None,
        };
        if let Some(hour) = named {
            self.pos += 1;
            return Ok(TimeOfDay {
                hour,
                minute: 0,
                second: 0,
            });
        }
        let (digits, rest) = split_digits(&word);
        if digits.is_empty() || digits.len() > 2 {
            return Err(self.unexpected(EXPECTED));
        }
        let hour: u32 = digits.parse().map_err(|_| self.unexpected(EXPECTED))?;
        let (mut minute, mut second, mut suffix) = (0, 0, rest);
        if let Some(after) = rest.strip_prefix(':') {
            let (m, after) = split_digits(after);
            if m.len() != 2 {
                return Err(self.unexpected(EXPECTED));
            }
            minute = m.parse().map_err(|_| self.unexpected(EXPECTED))?;
            suffix = after;
            if let Some(after) = after.strip_prefix(':') {
                let (s, after) = split_digits(after);
                if s.len() != 2 {
                    return Err(self.unexpected(EXPECTED));
                }
                second = s.parse().map_err(|_| self.unexpected(EXPECTED))?;
                suffix = after;
            }
        } else if let Some(after) = rest.strip_prefix('h') {
            // French style: 9h, 10h30.
            let (m, after) = split_digits(after);
            if !m.is_empty() {
                if m.len() != 2 {
                    return Err(self.unexpected(EXPECTED));
                }
                minute = m.parse().map_err(|_| self.unexpected(EXPECTED))?;
            }
            suffix = after;
            if !suffix.is_empty() {
                return Err(self.unexpected(EXPECTED));
            }
        }
        let suffix = suffix.to_string();
        self.pos += 1;
        let meridiem = match suffix.as_str() {
            "" => match self.peek() {
                Some("am" | "a.m." | "pm" | "p.m.") => self.next(),
                _ => None,
            },
            "am" | "a.m." | "pm" | "p.m." => Some(suffix),
            _ => {
                self.pos -= 1;
                return Err(self.unexpected(EXPECTED));
            }
        };
        let hour = match meridiem.as_deref() {
            Some(m) => {
                if !(1..=12).contains(&hour) {
                    return Err(self.out_of_range(Field::Hour, hour, 1, 12));
                }
                let pm = m.starts_with('p');
                match (hour, pm) {
                    (12, false) => 0,
                    (12, true) => 12,
                    (h, true) => h + 12,
                    (h, false) => h,
                }
            }
            None => hour,
        };
        if hour > 23 {
            return Err(self.out_of_range(Field::Hour, hour, 0, 23));
        }
        if minute > 59 {
            return Err(self.out_of_range(Field::Minute, minute, 0, 59));
        }
        if second > 59 {
            return Err(self.out_of_range(Field::Second, second, 0, 59));
        }
        Ok(TimeOfDay {
            hour,
            minute,
            second,
        })
    }

    /// Whether the current token can start a duration.
    pub(crate) fn at_duration(&self) -> bool {
        self.peek()
            .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_digit()) || count_word(w).is_some())
    }

    /// Parses a duration: `5m`, `1h30m`, `90 minutes`, `2 hours and 15 minutes`, `une heure`.
    /// Returns whole seconds.
    pub(crate) fn duration(&mut self) -> Result<u64, ScheduleError> {
        const EXPECTED: &str = "a duration such as 5m, 1h30m or 2 hours";
        let mut total: u64 = 0;
        loop {
            let Some(word) = self.next() else {
                return Err(self.unexpected(EXPECTED));
            };
            let amount = if let Some(n) = count_word(&word) {
                self.unit_amount(n)?
            } else if word.bytes().all(|b| b.is_ascii_digit()) {
                let n = word.parse::<u64>().map_err(|_| self.too_large())?;
                let amount = self.unit_amount(n)?;
                // French "2 h 15": minutes after hours may go without their unit.
                if self.words.get(self.pos - 1).and_then(|u| unit_seconds(u)) == Some(3600) {
                    amount + self.bare_minutes()
                } else {
                    amount
                }
            } else if let Some(secs) = hours_minutes(&word) {
                secs
            } else if word.starts_with(|c: char| c.is_ascii_digit()) {
                match duration::parse(&word) {
                    Ok(d) => d.as_secs(),
                    Err(DurationError::UnknownUnit { unit, .. }) => {
                        return Err(self.unknown_unit(&unit));
                    }
                    Err(DurationError::Overflow(_)) => return Err(self.too_large()),
                    Err(_) => {
                        self.pos -= 1;
                        return Err(self.unexpected(EXPECTED));
                    }
                }
            } else {
                self.pos -= 1;
                return Err(self.unexpected(EXPECTED));
            };
            total = total.checked_add(amount).ok_or_else(|| self.too_large())?;
            // More parts: "1 hour 30 minutes", "2 hours and 15 minutes", "1h, 30m".
            let save = self.pos;
            let joined = self.eat(&["and", "et", ","]);
            if self.at_duration() {
                continue;
            }
            self.pos = save;
            if joined && !self.at_end() {
                self.pos += 1;
                return Err(self.unexpected(EXPECTED));
            }
            return Ok(total);
        }
    }

    /// A bare `15` after `2 h` (not followed by a unit of its own) is minutes; 0 when absent.
    fn bare_minutes(&mut self) -> u64 {
        let minutes = self
            .peek()
            .filter(|w| (1..=2).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|w| w.parse::<u64>().ok())
            .filter(|m| *m < 60);
        match minutes {
            Some(m) if self.peek2().and_then(unit_seconds).is_none() => {
                self.pos += 1;
                m * 60
            }
            _ => 0,
        }
    }

    /// After a count, the unit word; returns count × unit in seconds.
    fn unit_amount(&mut self, count: u64) -> Result<u64, ScheduleError> {
        let Some(word) = self.next() else {
            return Err(self.unexpected("a unit: s, m, h, d (or seconds, minutes, hours, days)"));
        };
        let scale = unit_seconds(&word).ok_or_else(|| self.unknown_unit(&word))?;
        count.checked_mul(scale).ok_or_else(|| self.too_large())
    }

    /// The unknown-unit error for this phrase.
    pub(crate) fn unknown_unit(&self, unit: &str) -> ScheduleError {
        ScheduleError::UnknownUnit {
            expr: self.expr.to_string(),
            unit: unit.to_string(),
        }
    }

    fn too_large(&self) -> ScheduleError {
        ScheduleError::TooLarge {
            expr: self.expr.to_string(),
            what: "the duration",
            limit: "the longest is 100 years",
        }
    }

    /// A day of the month: `1st`, `2nd`, `15th`, `15`, `1er`; 1-31.
    pub(crate) fn day_of_month(&mut self) -> Result<u32, ScheduleError> {
        const EXPECTED: &str = "a day of the month such as 1st, 15th or 15";
        let Some(word) = self.peek().map(str::to_string) else {
            return Err(self.unexpected(EXPECTED));
        };
        let (digits, suffix) = split_digits(&word);
        let Ok(day) = digits.parse::<u32>() else {
            return Err(self.unexpected(EXPECTED));
        };
        let english = match day % 100 {
            11..=13 => "th",
            _ => match day % 10 {
                1 => "st",
                2 => "nd",
                3 => "rd",
                _ => "th",
            },
        };
        let suffix_ok = suffix.is_empty()
            || suffix == english
            || (day == 1 && suffix == "er")
            || (day > 1 && ["e", "ème", "eme"].contains(&suffix));
        if !suffix_ok {
            return Err(self.unexpected(EXPECTED));
        }
        if !(1..=31).contains(&day) {
            return Err(self.out_of_range(Field::DayOfMonth, day, 1, 31));
        }
        self.pos += 1;
        Ok(day)
    }
}

/// Splits leading ASCII digits from the rest.
fn split_digits(word: &str) -> (&str, &str) {
    let end = word
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(word.len());
    word.split_at(end)
}

/// French `1h30` (hours, then minutes without a unit) in seconds.
fn hours_minutes(word: &str) -> Option<u64> {
    let (hours, rest) = split_digits(word);
    let minutes = rest.strip_prefix('h')?;
    if hours.is_empty() || minutes.len() != 2 || !minutes.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let minutes: u64 = minutes.parse().ok().filter(|m| *m < 60)?;
    hours
        .parse::<u64>()
        .ok()?
        .checked_mul(3600)?
        .checked_add(minutes * 60)
}

/// `a`, `an`, `one`, `un`, `une` as a count of one.
fn count_word(word: &str) -> Option<u64> {
    matches!(word, "a" | "an" | "one" | "un" | "une").then_some(1)
}

/// Seconds in a unit word (English or French, singular or plural).
pub(crate) fn unit_seconds(word: &str) -> Option<u64> {
    Some(match word {
        "s" | "sec" | "secs" | "second" | "seconds" | "seconde" | "secondes" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" | "heure" | "heures" => 3600,
        "d" | "day" | "days" | "jour" | "jours" => 86_400,
        "w" | "week" | "weeks" | "semaine" | "semaines" => 7 * 86_400,
        _ => return None,
    })
}

/// A weekday name, Sunday = 0, and whether it was plural (`mondays`, `lundis`).
pub(crate) fn weekday_name(word: &str) -> Option<(u32, bool)> {
    const NAMES: [[&str; 4]; 7] = [
        ["sunday", "sun", "dimanche", ""],
        ["monday", "mon", "lundi", ""],
        ["tuesday", "tue", "mardi", "tues"],
        ["wednesday", "wed", "mercredi", ""],
        ["thursday", "thu", "jeudi", "thurs"],
        ["friday", "fri", "vendredi", ""],
        ["saturday", "sat", "samedi", ""],
    ];
    for (day, names) in NAMES.iter().enumerate() {
        for name in names.iter().filter(|n| !n.is_empty()) {
            if word == *name {
                return Some((day as u32, false));
            }
            if word.strip_suffix('s') == Some(name) && name.len() > 4 {
                return Some((day as u32, true));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(text: &str) -> Result<TimeOfDay, ScheduleError> {
        let mut t = Tokens::new(text);
        let tod = t.time_of_day()?;
        t.finish()?;
        Ok(tod)
    }

    fn hm(text: &str) -> (u32, u32) {
        let t = time(text).unwrap();
        (t.hour, t.minute)
    }

    #[test]
    fn times_of_day() {
        assert_eq!(hm("9am"), (9, 0));
        assert_eq!(hm("9 AM"), (9, 0));
        assert_eq!(hm("9:30pm"), (21, 30));
        assert_eq!(hm("12am"), (0, 0));
        assert_eq!(hm("12pm"), (12, 0));
        assert_eq!(hm("09:30"), (9, 30));
        assert_eq!(hm("17:00"), (17, 0));
        assert_eq!(hm("9"), (9, 0));
        assert_eq!(hm("9h"), (9, 0));
        assert_eq!(hm("10h30"), (10, 30));
        assert_eq!(hm("noon"), (12, 0));
        assert_eq!(hm("midi"), (12, 0));
        assert_eq!(hm("minuit"), (0, 0));
        assert_eq!(time("9:30:15").unwrap().second, 15);
        let err = |t: &str| time(t).unwrap_err().to_string();
        assert!(
            err("25:00").contains("hour 25 out of range 0-23"),
            "{}",
            err("25:00")
        );
        assert!(err("13pm").contains("hour 13 out of range 1-12"));
        assert!(err("9:75").contains("minute 75 out of range 0-59"));
        assert!(err("9:5").contains("unexpected \"9:5\""));
        assert!(err("9xm").contains("unexpected \"9xm\""));
        assert!(
            err("9 o'clock")
                .contains("understood \"9\"; could not understand \"o'clock\" (at word 2)")
        );
    }

    fn dur(text: &str) -> Result<u64, ScheduleError> {
        let mut t = Tokens::new(text);
        let d = t.duration()?;
        t.finish()?;
        Ok(d)
    }

    #[test]
    fn durations() {
        assert_eq!(dur("5m").unwrap(), 300);
        assert_eq!(dur("1h30m").unwrap(), 5400);
        assert_eq!(dur("90 minutes").unwrap(), 5400);
        assert_eq!(dur("2 hours and 15 minutes").unwrap(), 8100);
        assert_eq!(dur("1 hour 30 minutes").unwrap(), 5400);
        assert_eq!(dur("1h, 30m").unwrap(), 5400);
        assert_eq!(dur("an hour").unwrap(), 3600);
        assert_eq!(dur("une heure et 5 minutes").unwrap(), 3900);
        assert_eq!(dur("2 weeks").unwrap(), 14 * 86_400);
        let err = dur("5 blorps").unwrap_err().to_string();
        assert!(
            err.ends_with("unknown unit \"blorps\"; expected s, m, h, d"),
            "{err}"
        );
        assert!(
            dur("5blorps")
                .unwrap_err()
                .to_string()
                .contains("\"blorps\"")
        );
        assert!(dur("5").unwrap_err().to_string().contains("ends too early"));
        assert!(
            dur("5m and")
                .unwrap_err()
                .to_string()
                .contains("ends too early")
        );
        assert!(dur("5m and soon").is_err());
        assert!(dur("99999999999999999999 s").is_err());
        // French: minutes after hours without their unit.
        assert_eq!(dur("1h30").unwrap(), 5400);
        assert_eq!(dur("2 h 15").unwrap(), 8100);
        assert_eq!(dur("2 h 15 min").unwrap(), 8100);
        assert_eq!(dur("1 heure 5").unwrap(), 3900);
        assert_eq!(dur("10h05").unwrap(), 36_300);
        assert!(dur("1h75").is_err());
        assert!(dur("2 h 75").is_err());
        assert!(dur("2 min 15").is_err(), "only hours take bare minutes");
    }

    #[test]
    fn names_and_ordinals() {
        assert_eq!(weekday_name("mon"), Some((1, false)));
        assert_eq!(weekday_name("mondays"), Some((1, true)));
        assert_eq!(weekday_name("lundis"), Some((1, true)));
        assert_eq!(weekday_name("dimanche"), Some((0, false)));
        assert_eq!(weekday_name("mons"), None);
        let day = |t: &str| Tokens::new(t).day_of_month();
        assert_eq!(day("1st").unwrap(), 1);
        assert_eq!(day("22nd").unwrap(), 22);
        assert_eq!(day("13th").unwrap(), 13);
        assert_eq!(day("1er").unwrap(), 1);
        assert_eq!(day("15").unwrap(), 15);
        assert!(day("1nd").is_err());
        assert!(
            day("32nd")
                .unwrap_err()
                .to_string()
                .contains("day-of-month 32 out of range 1-31")
        );
    }
}
