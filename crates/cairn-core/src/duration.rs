//! Compact durations as written in routine files and config: `300s`, `5m`, `1h30m`, `2d`.
//!
//! A bare integer means seconds. Output is always whole seconds (`3600s`) so
//! that a file written by a person in seconds round-trips unchanged.

use std::fmt;
use std::time::Duration;

/// Why a compact duration could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text was empty.
    #[error("empty duration; expected a number with a unit such as 300s, 5m, 1h30m")]
    Empty,
    /// A number was not followed by a known unit.
    #[error("unknown unit \"{unit}\" in \"{text}\"; expected s, m, h or d")]
    UnknownUnit {
        /// The whole input.
        text: String,
        /// The unit that was not recognised.
        unit: String,
    },
    /// A unit appeared without a number before it, or a character was out of place.
    #[error("unexpected \"{token}\" in \"{text}\"; expected a number such as 300s, 5m, 1h30m")]
    Unexpected {
        /// The whole input.
        text: String,
        /// The offending part.
        token: String,
    },
    /// The total does not fit in 64-bit seconds.
    #[error("duration \"{0}\" is too large")]
    Overflow(String),
}

/// The written forms [`parse`] accepts (without surrounding spaces), as a
/// regular expression for schemas and forms.
pub const PATTERN: &str = "^([0-9]+|([0-9]+(s|sec|secs|m|min|mins|h|hr|hrs|d))+)$";

/// The OpenAPI schema of a compact duration as written: `"300s"`, `"5m"`, `"1h30m"`.
#[cfg(feature = "openapi")]
pub struct CompactDuration;

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for CompactDuration {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(PATTERN))
            .description(Some(
                "A duration: a number with a unit (`s`, `m`, `h`, `d`), units combined \
                 (`1h30m`), or a bare number of seconds; shown as whole seconds (`300s`).",
            ))
            .examples(["5m", "1h30m", "300s"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for CompactDuration {}

/// Parses `300s`, `5m`, `1h30m`, `2d`, or a bare number of seconds.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(DurationError::Empty);
    }
    if let Ok(secs) = trimmed.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total: u64 = 0;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(DurationError::Unexpected {
                text: trimmed.to_string(),
                token: rest.to_string(),
            });
        }
        let (number, after) = rest.split_at(digits);
        let unit_len = after.len()
            - after
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let (unit, after_unit) = after.split_at(unit_len);
        let scale = match unit {
            "s" | "sec" | "secs" => 1,
            "m" | "min" | "mins" => 60,
            "h" | "hr" | "hrs" => 3600,
            "d" => 86_400,
            "" => {
                return Err(DurationError::Unexpected {
                    text: trimmed.to_string(),
                    token: after
                        .chars()
                        .next()
                        .map(String::from)
                        .unwrap_or_else(|| number.to_string()),
                });
            }
            other => {
                return Err(DurationError::UnknownUnit {
                    text: trimmed.to_string(),
                    unit: other.to_string(),
                });
            }
        };
        let value: u64 = number
            .parse()
            .map_err(|_| DurationError::Overflow(trimmed.to_string()))?;
        total = value
            .checked_mul(scale)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| DurationError::Overflow(trimmed.to_string()))?;
        rest = after_unit;
    }
    Ok(Duration::from_secs(total))
}

/// Formats a duration as whole seconds, the canonical form: `300s`.
pub fn format(duration: Duration) -> String {
    format!("{}s", duration.as_secs())
}

/// A `Display` adapter that prints a duration in its canonical form.
pub struct Compact(pub Duration);

impl fmt::Display for Compact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0.as_secs())
    }
}

/// Serde adapter for `Duration` fields written as compact strings (`with = "duration::serde_compact"`).
pub mod serde_compact {
    use super::{format, parse};
    use serde::{Deserialize, Deserializer, Serializer, de};
    use std::time::Duration;

    /// Serializes as `"300s"`.
    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format(*value))
    }

    /// Accepts `"300s"`, `"5m"`, … or a bare integer of seconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        match Raw::deserialize(deserializer)? {
            Raw::Secs(secs) => Ok(Duration::from_secs(secs)),
            Raw::Text(text) => parse(&text).map_err(de::Error::custom),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    pub(super) enum Raw {
        Secs(u64),
        Text(String),
    }
}

/// Serde adapter for `Option<Duration>` fields written as compact strings.
pub mod serde_compact_opt {
    use super::{format, parse, serde_compact::Raw};
    use serde::{Deserialize, Deserializer, Serializer, de};
    use std::time::Duration;

    /// Serializes `Some` as `"300s"` and `None` as null.
    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => serializer.serialize_str(&format(*d)),
            None => serializer.serialize_none(),
        }
    }

    /// Accepts null, a compact string or a bare integer of seconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        match Option::<Raw>::deserialize(deserializer)? {
            None => Ok(None),
            Some(Raw::Secs(secs)) => Ok(Some(Duration::from_secs(secs))),
            Some(Raw::Text(text)) => parse(&text).map(Some).map_err(de::Error::custom),
        }
    }
}

/// How long ago `then` was, in its largest whole unit (`5s`, `3m`, `2h`,
/// `4d`), for listings; a future instant reads `0s`.
pub fn age(now: chrono::DateTime<chrono::Utc>, then: chrono::DateTime<chrono::Utc>) -> String {
    let secs = (now - then).num_seconds().max(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(parse("300s").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("2d").unwrap(), Duration::from_secs(172_800));
        assert_eq!(parse("45").unwrap(), Duration::from_secs(45));
        assert_eq!(parse(" 10s ").unwrap(), Duration::from_secs(10));
    }

    #[test]
    fn rejects_bad_text_naming_the_token() {
        assert_eq!(parse(""), Err(DurationError::Empty));
        let err = parse("5 blorps").unwrap_err().to_string();
        assert!(err.contains("\" \""), "{err}");
        let err = parse("5blorps").unwrap_err().to_string();
        assert!(
            err.contains("blorps") && err.contains("expected s, m, h or d"),
            "{err}"
        );
        assert!(matches!(parse("s5"), Err(DurationError::Unexpected { .. })));
        assert!(matches!(
            parse("99999999999999999999d"),
            Err(DurationError::Overflow(_))
        ));
        assert!(matches!(
            parse("9999999999999999d"),
            Err(DurationError::Overflow(_))
        ));
    }

    proptest::proptest! {
        /// The schema's pattern accepts exactly what `parse` reads (spaces
        /// aside, and totals too large for 64-bit seconds).
        #[test]
        fn the_pattern_agrees_with_parse(text in "[0-9smhdecinr]{1,8}") {
            let pattern = regex::Regex::new(PATTERN).unwrap();
            let parsed = parse(&text);
            if !matches!(parsed, Err(DurationError::Overflow(_))) {
                proptest::prop_assert_eq!(pattern.is_match(&text), parsed.is_ok(), "{}", text);
            }
        }
    }

    #[test]
    fn the_pattern_reads_the_written_forms() {
        let pattern = regex::Regex::new(PATTERN).unwrap();
        for text in ["300s", "5m", "1h30m", "2d", "45", "10secs", "3hrs2mins"] {
            assert!(pattern.is_match(text) && parse(text).is_ok(), "{text}");
        }
        for text in ["", "s5", "5 m", "5x", "1.5h", "-5s"] {
            assert!(!pattern.is_match(text) && parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn formats_whole_seconds() {
        assert_eq!(format(Duration::from_secs(3600)), "3600s");
        assert_eq!(Compact(Duration::from_secs(5)).to_string(), "5s");
    }

    #[test]
    fn ages_use_the_largest_whole_unit() {
        let now = chrono::DateTime::from_timestamp(1_000_000, 0).unwrap();
        let ago = |secs| age(now, now - chrono::Duration::seconds(secs));
        assert_eq!(
            [ago(5), ago(90), ago(7200), ago(200_000), ago(-3)],
            ["5s", "1m", "2h", "2d", "0s"]
        );
    }
}
