//! Why a threshold expression could not be parsed or evaluated.

use super::CmpOp;
#[cfg(doc)]
use super::{Expr, MAX_DEPTH, MAX_LEN};

/// Why a threshold expression could not be parsed or evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    /// The expression was empty or only whitespace.
    #[error("empty expression; expected e.g. result.status_code != 200")]
    Empty,
    /// The expression is longer than [`MAX_LEN`] bytes.
    #[error("expression is {len} bytes; the limit is {max}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The normalized form ([`Expr`]'s `Display`) is longer than [`MAX_LEN`]
    /// bytes: refused so that every accepted expression's normalized text
    /// parses back (found by fuzzing).
    #[error(
        "expression is {len} bytes once normalized (spaces around operators, escaped strings); the limit is {max}"
    )]
    NormalizedTooLong {
        /// The normalized length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Parentheses and `not` nest deeper than [`MAX_DEPTH`].
    #[error("expression nests deeper than {max} levels at {position}")]
    TooDeep {
        /// 1-based character position of the token that went too deep.
        position: usize,
        /// The limit.
        max: usize,
    },
    /// A token that does not fit where it appears.
    #[error("unexpected \"{token}\" at {position}; expected {expected}")]
    Unexpected {
        /// The token as written.
        token: String,
        /// Its 1-based character position.
        position: usize,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// The expression stopped before it was complete.
    #[error("unexpected end of expression at {position}; expected {expected}")]
    UnexpectedEnd {
        /// 1-based character position just past the end.
        position: usize,
        /// What was still needed.
        expected: &'static str,
    },
    /// A word that is neither `result…` nor a keyword.
    #[error("unknown word \"{word}\" at {position}; expected {expected}")]
    UnknownWord {
        /// The word as written.
        word: String,
        /// Its 1-based character position.
        position: usize,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// A quote that is never closed.
    #[error("unterminated string starting at {position}")]
    UnterminatedString {
        /// 1-based character position of the opening quote.
        position: usize,
    },
    /// A number too large to represent.
    #[error("number \"{text}\" at {position} is out of range")]
    BadNumber {
        /// The number as written.
        text: String,
        /// Its 1-based character position.
        position: usize,
    },
    /// A path used as a test (`result.ok`) does not hold `true` or `false`.
    #[error("{path} is {found}, not true or false; compare it instead (e.g. {path} != null)")]
    NotBoolean {
        /// The path, as written in normalized form.
        path: String,
        /// The JSON type it held.
        found: &'static str,
    },
    /// An ordering comparison between values it cannot order.
    #[error(
        "type mismatch in {comparison}: \"{op}\" compares two numbers or two strings, but {path} is {left} and the other side is {right}"
    )]
    TypeMismatch {
        /// The comparison operator.
        op: CmpOp,
        /// JSON type of the left operand's value.
        left: &'static str,
        /// JSON type of the right operand's value.
        right: &'static str,
        /// The path involved (the left one when both are paths; the comparison when neither is).
        path: String,
        /// The whole comparison, normalized.
        comparison: String,
    },
}
