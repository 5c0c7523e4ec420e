//! Typed parse errors for schedules: each names the expression, the token and what was expected.

use std::fmt;

/// A cron field (or the matching part of a human phrase), used to name where a value is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// Seconds, 0-59 (6- and 7-field cron only).
    Second,
    /// Minutes, 0-59.
    Minute,
    /// Hours, 0-23.
    Hour,
    /// Day of month, 1-31.
    DayOfMonth,
    /// Month, 1-12 or JAN-DEC.
    Month,
    /// Day of week, 0-7 (0 and 7 are Sunday) or SUN-SAT.
    DayOfWeek,
    /// Year, 1970-2099 (7-field cron only).
    Year,
}

impl Field {
    /// The smallest value the field accepts.
    pub fn min(self) -> u32 {
        match self {
            Field::Second | Field::Minute | Field::Hour | Field::DayOfWeek => 0,
            Field::DayOfMonth | Field::Month => 1,
            Field::Year => super::cron::MIN_YEAR,
        }
    }

    /// The largest value the field accepts.
    pub fn max(self) -> u32 {
        match self {
            Field::Second | Field::Minute => 59,
            Field::Hour => 23,
            Field::DayOfMonth => 31,
            Field::Month => 12,
            Field::DayOfWeek => 7,
            Field::Year => super::cron::MAX_YEAR,
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
            Field::Year => "year",
        })
    }
}

/// Why a schedule expression (cron, human phrase, one-shot, normalized text) was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The expression was empty or only whitespace.
    #[error(
        "empty schedule; expected a cron expression such as \"0 9 * * 1-5\" or a phrase such as \"every 5m\""
    )]
    Empty,
    /// A cron expression had the wrong number of fields.
    #[error(
        "\"{expr}\": {count} fields; expected 5 (minute hour day-of-month month day-of-week), 6 (seconds first) or 7 (seconds first, year last)"
    )]
    FieldCount {
        /// The whole expression.
        expr: String,
        /// How many fields were found.
        count: usize,
    },
    /// A token that is not valid where it appears.
    #[error("\"{expr}\": {field} \"{token}\" is not valid; expected {expected}")]
    InvalidToken {
        /// The whole expression.
        expr: String,
        /// The field the token belongs to.
        field: Field,
        /// The offending token.
        token: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// A number outside its field's range.
    #[error("\"{expr}\": {field} {value} out of range {min}-{max}")]
    OutOfRange {
        /// The whole expression.
        expr: String,
        /// The field the value belongs to.
        field: Field,
        /// The value as written.
        value: String,
        /// Smallest accepted value.
        min: u32,
        /// Largest accepted value.
        max: u32,
    },
    /// A range whose start is after its end (`5-1`); cron ranges do not wrap.
    #[error("\"{expr}\": {field} range {start}-{end} is reversed; expected start <= end")]
    ReversedRange {
        /// The whole expression.
        expr: String,
        /// The field the range belongs to.
        field: Field,
        /// Range start as written.
        start: String,
        /// Range end as written.
        end: String,
    },
    /// An `@name` macro that does not exist (or, like `@reboot`, has no meaning here).
    #[error(
        "\"{expr}\": unknown macro \"{token}\"; expected @hourly, @daily, @midnight, @weekly, @monthly, @yearly or @annually"
    )]
    UnknownMacro {
        /// The whole expression.
        expr: String,
        /// The macro as written.
        token: String,
    },
    /// A cron expression that is well formed but can never fire.
    #[error("\"{expr}\": never fires: {reason}")]
    NeverFires {
        /// The whole expression.
        expr: String,
        /// Why no instant can match.
        reason: String,
    },
    /// A duration unit that is not known.
    #[error("\"{expr}\": unknown unit \"{unit}\"; expected s, m, h, d")]
    UnknownUnit {
        /// The whole expression.
        expr: String,
        /// The unit as written.
        unit: String,
    },
    /// A token that does not fit the phrase at this point.
    #[error("\"{expr}\": unexpected \"{token}\"; expected {expected}")]
    Unexpected {
        /// The whole expression.
        expr: String,
        /// The offending token (and what follows it).
        token: String,
        /// What would have been accepted here.
        expected: String,
    },
    /// The start of a phrase was understood, the rest was not: nothing is guessed.
    #[error(
        "\"{expr}\": understood \"{understood}\"; could not understand \"{rest}\" (at word {word}); expected {expected}"
    )]
    NotUnderstood {
        /// The whole expression.
        expr: String,
        /// The words read before the problem, as written.
        understood: String,
        /// The words from the problem on, as written.
        rest: String,
        /// 1-based number of the first word not understood.
        word: usize,
        /// What would have been accepted there.
        expected: String,
    },
    /// Several times of day that one cron rule cannot express together.
    #[error(
        "\"{expr}\": one schedule cannot fire at exactly {times}: cron would fire at every listed minute of every listed hour; use one schedule per time, or times that share their minutes (such as 9:00 and 17:00)"
    )]
    TimesNotAGrid {
        /// The whole expression.
        expr: String,
        /// The times as HH:MM, joined with "and".
        times: String,
    },
    /// Several times of day given where only one fits (a one-shot, every other day).
    #[error("\"{expr}\": {what} takes one time of day; use one schedule per time")]
    OneTimeOnly {
        /// The whole expression.
        expr: String,
        /// What kind of schedule it is, e.g. "a one-shot".
        what: &'static str,
    },
    /// The phrase stopped before it was complete.
    #[error("\"{expr}\": ends too early; expected {expected}")]
    Incomplete {
        /// The whole expression.
        expr: String,
        /// What was still needed.
        expected: String,
    },
    /// Text that is neither a cron expression nor a phrase we know.
    #[error(
        "\"{expr}\": not a cron expression or a known phrase; expected e.g. \"0 9 * * 1-5\", \"every 5m\", \"every weekday at 9am\", \"in 20m\", \"tomorrow at 9am\" or an ISO 8601 time"
    )]
    Unrecognized {
        /// The whole expression.
        expr: String,
    },
    /// A one-shot time that is not after "now".
    #[error(
        "\"{expr}\": {at} is not in the future (now is {now}); a one-shot must be later than now"
    )]
    InPast {
        /// The whole expression.
        expr: String,
        /// The resolved instant, RFC 3339.
        at: String,
        /// The "now" it was compared with, RFC 3339.
        now: String,
    },
    /// An interval of zero length.
    #[error("\"{expr}\": the interval is zero; expected at least 1s")]
    ZeroInterval {
        /// The whole expression.
        expr: String,
    },
    /// A duration or date beyond what schedules support.
    #[error("\"{expr}\": {what} is too large; {limit}")]
    TooLarge {
        /// The whole expression.
        expr: String,
        /// What overflowed.
        what: &'static str,
        /// The limit.
        limit: &'static str,
    },
    /// A time zone name that is not in the IANA database.
    #[error(
        "unknown time zone \"{zone}\"; expected an IANA name such as Europe/Paris or America/New_York"
    )]
    UnknownZone {
        /// The name as given.
        zone: String,
    },
}
