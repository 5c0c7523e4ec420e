//! Threshold expressions: a small, safe boolean language over a tool's JSON
//! result, used by `on_threshold` watchers (`result.status_code != 200`,
//! `result.count > 100 and not result.paused`).
//!
//! Grammar (precedence `not` > `and` > `or`; comparisons bind tightest):
//!
//! ```text
//! expr    := and ("or" and)*
//! and     := unary ("and" unary)*
//! unary   := "not" unary | "(" expr ")" | operand (CMP operand)?
//! operand := path | number | string | null | true | false
//! path    := "result" ("." segment)*        segment: [A-Za-z0-9_-]+
//! CMP     := == | != | > | < | >= | <=
//! ```
//!
//! Keywords are lowercase (`AND` is an unknown word, not `and`). Strings take
//! "double" or 'single' quotes with backslash escapes; what is inside is text,
//! operators included. A numeric path segment indexes an array, or names an
//! object key. A bare operand is a test only if it is a path or `true`/`false`,
//! and a path used that way must hold a JSON bool.
//!
//! Semantics: a missing path is `null`; `==`/`!=` compare any JSON values,
//! numbers by value (`200 == 200.0`); ordering needs two numbers or two
//! strings, anything else is [`ThresholdError::TypeMismatch`], never a silent
//! `false`. Inputs (and their normalized form, so that it always parses back)
//! are capped at [`MAX_LEN`] bytes and [`MAX_DEPTH`] nested
//! `(`/`not`, so no input can exhaust the stack. Nothing is ever evaluated
//! as code.

mod error;
mod eval;
mod expr;
mod lex;
mod parser;

pub use error::ThresholdError;
pub use expr::{CmpOp, Expr, Operand, Path};
use lex::{Tok, lex};
use parser::Parser;

/// Longest expression accepted, in bytes.
pub const MAX_LEN: usize = 1024;
/// Deepest nesting of parentheses and `not` accepted.
pub const MAX_DEPTH: usize = 64;

/// What an operand position accepts, for error messages.
const EXPECTED_VALUE: &str =
    "a value (result…, a number, a quoted string, null, true, false), not or (";
const EXPECTED_AFTER: &str = "and, or, ) or the end";

/// Parses a threshold expression; see the module doc for the grammar.
pub fn parse(src: &str) -> Result<Expr, ThresholdError> {
    if src.len() > MAX_LEN {
        return Err(ThresholdError::TooLong {
            len: src.len(),
            max: MAX_LEN,
        });
    }
    let tokens = lex(src)?;
    if tokens.len() == 1 {
        return Err(ThresholdError::Empty);
    }
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let expr = parser.or()?;
    if *parser.peek() != Tok::End {
        return Err(parser.unexpected(EXPECTED_AFTER));
    }
    let len = expr.to_string().len();
    if len > MAX_LEN {
        return Err(ThresholdError::NormalizedTooLong { len, max: MAX_LEN });
    }
    Ok(expr)
}
