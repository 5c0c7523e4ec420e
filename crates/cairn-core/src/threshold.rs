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

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Number, Value};

/// Longest expression accepted, in bytes.
pub const MAX_LEN: usize = 1024;
/// Deepest nesting of parentheses and `not` accepted.
pub const MAX_DEPTH: usize = 64;

/// What an operand position accepts, for error messages.
const EXPECTED_VALUE: &str =
    "a value (result…, a number, a quoted string, null, true, false), not or (";
const EXPECTED_AFTER: &str = "and, or, ) or the end";

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

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>`
    Gt,
    /// `<`
    Lt,
    /// `>=`
    Ge,
    /// `<=`
    Le,
}

impl CmpOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Gt => ">",
            CmpOp::Lt => "<",
            CmpOp::Ge => ">=",
            CmpOp::Le => "<=",
        }
    }
}

impl fmt::Display for CmpOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A path into the result: `result` followed by zero or more segments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Path {
    /// The segments after `result`, e.g. `["items", "0", "id"]`.
    pub segments: Vec<String>,
}

impl Path {
    /// The value at this path; a missing key or index is `null`.
    pub fn lookup<'a>(&self, result: &'a Value) -> &'a Value {
        let mut at = result;
        for segment in &self.segments {
            let next = match at {
                Value::Object(map) => map.get(segment),
                Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            match next {
                Some(value) => at = value,
                None => return &Value::Null,
            }
        }
        at
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("result")?;
        for segment in &self.segments {
            write!(f, ".{segment}")?;
        }
        Ok(())
    }
}

/// One side of a comparison: a path or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A path into the result.
    Path(Path),
    /// A literal: a number, a string, `null`, `true` or `false`.
    Literal(Value),
}

impl Operand {
    fn value<'a>(&'a self, result: &'a Value) -> &'a Value {
        match self {
            Operand::Path(path) => path.lookup(result),
            Operand::Literal(value) => value,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            Operand::Path(path) => Some(path),
            Operand::Literal(_) => None,
        }
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Path(path) => fmt::Display::fmt(path, f),
            Operand::Literal(Value::String(text)) => {
                f.write_str("\"")?;
                for c in text.chars() {
                    match c {
                        '"' => f.write_str("\\\"")?,
                        '\\' => f.write_str("\\\\")?,
                        '\n' => f.write_str("\\n")?,
                        '\t' => f.write_str("\\t")?,
                        c => write!(f, "{c}")?,
                    }
                }
                f.write_str("\"")
            }
            // Numbers, null, true, false print as JSON does.
            Operand::Literal(value) => fmt::Display::fmt(value, f),
        }
    }
}

/// A parsed threshold expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Either side is true (evaluated left first, short-circuit).
    Or(Box<Expr>, Box<Expr>),
    /// Both sides are true (evaluated left first, short-circuit).
    And(Box<Expr>, Box<Expr>),
    /// The negation.
    Not(Box<Expr>),
    /// A comparison of two operands.
    Compare {
        /// Left operand.
        left: Operand,
        /// The operator.
        op: CmpOp,
        /// Right operand.
        right: Operand,
    },
    /// A bare operand used as a test: a path holding a bool, or `true`/`false`.
    Test(Operand),
}

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

impl Expr {
    /// Evaluates the expression against a tool's result.
    pub fn eval(&self, result: &Value) -> Result<bool, ThresholdError> {
        match self {
            Expr::Or(left, right) => Ok(left.eval(result)? || right.eval(result)?),
            Expr::And(left, right) => Ok(left.eval(result)? && right.eval(result)?),
            Expr::Not(inner) => Ok(!inner.eval(result)?),
            Expr::Test(operand) => match operand.value(result) {
                Value::Bool(b) => Ok(*b),
                other => Err(ThresholdError::NotBoolean {
                    path: operand.to_string(),
                    found: type_name(other),
                }),
            },
            Expr::Compare { left, op, right } => {
                let (l, r) = (left.value(result), right.value(result));
                match op {
                    CmpOp::Eq => Ok(json_eq(l, r)),
                    CmpOp::Ne => Ok(!json_eq(l, r)),
                    _ => {
                        let ordering = match (l, r) {
                            (Value::Number(a), Value::Number(b)) => cmp_numbers(a, b),
                            (Value::String(a), Value::String(b)) => a.cmp(b),
                            _ => {
                                let comparison = self.to_string();
                                let path = left
                                    .path()
                                    .or_else(|| right.path())
                                    .map_or_else(|| comparison.clone(), Path::to_string);
                                return Err(ThresholdError::TypeMismatch {
                                    op: *op,
                                    left: type_name(l),
                                    right: type_name(r),
                                    path,
                                    comparison,
                                });
                            }
                        };
                        Ok(match op {
                            CmpOp::Gt => ordering == Ordering::Greater,
                            CmpOp::Lt => ordering == Ordering::Less,
                            CmpOp::Ge => ordering != Ordering::Less,
                            _ => ordering != Ordering::Greater,
                        })
                    }
                }
            }
        }
    }
}

impl fmt::Display for Expr {
    /// The normalized form: single spaces, double-quoted strings, and only the
    /// parentheses precedence needs. It parses back to an equal `Expr`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Or(left, right) => {
                // Left-associative: a right-hand `or` needs parentheses to keep its shape.
                write!(f, "{left} or ")?;
                wrap(f, right, matches!(**right, Expr::Or(..)))
            }
            Expr::And(left, right) => {
                wrap(f, left, matches!(**left, Expr::Or(..)))?;
                f.write_str(" and ")?;
                wrap(f, right, matches!(**right, Expr::Or(..) | Expr::And(..)))
            }
            Expr::Not(inner) => {
                f.write_str("not ")?;
                wrap(f, inner, matches!(**inner, Expr::Or(..) | Expr::And(..)))
            }
            Expr::Compare { left, op, right } => write!(f, "{left} {op} {right}"),
            Expr::Test(operand) => fmt::Display::fmt(operand, f),
        }
    }
}

fn wrap(f: &mut fmt::Formatter<'_>, expr: &Expr, parens: bool) -> fmt::Result {
    if parens {
        write!(f, "({expr})")
    } else {
        fmt::Display::fmt(expr, f)
    }
}

/// The JSON type of a value, as named in errors.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Orders two JSON numbers by value, exactly for integers.
fn cmp_numbers(a: &Number, b: &Number) -> Ordering {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x.cmp(&y);
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return x.cmp(&y);
    }
    // One is a float or they straddle i64::MAX; JSON numbers are never NaN.
    let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
    x.partial_cmp(&y).unwrap_or(Ordering::Equal)
}

/// JSON equality with numbers compared by value (`200 == 200.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A token and its 1-based character position.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open,
    Close,
    Op(CmpOp),
    And,
    Or,
    Not,
    Value(Value),
    Path(Path),
    End,
}

struct Lexed {
    tok: Tok,
    /// 1-based character position.
    position: usize,
    /// The text as written, for errors.
    text: String,
}

fn lex(src: &str) -> Result<Vec<Lexed>, ThresholdError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        let position = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let tok = match c {
            '(' => {
                i += 1;
                Tok::Open
            }
            ')' => {
                i += 1;
                Tok::Close
            }
            '=' | '!' | '<' | '>' => {
                let next_eq = chars.get(i + 1) == Some(&'=');
                let op = match (c, next_eq) {
                    ('=', true) => CmpOp::Eq,
                    ('!', true) => CmpOp::Ne,
                    ('<', true) => CmpOp::Le,
                    ('>', true) => CmpOp::Ge,
                    ('<', false) => CmpOp::Lt,
                    ('>', false) => CmpOp::Gt,
                    _ => {
                        return Err(ThresholdError::Unexpected {
                            token: c.to_string(),
                            position,
                            expected: if c == '=' {
                                "== (equality is written with two =)"
                            } else {
                                "!= (negation is written not)"
                            },
                        });
                    }
                };
                i += if next_eq { 2 } else { 1 };
                Tok::Op(op)
            }
            '"' | '\'' => {
                let (text, end) = string(&chars, i)?;
                i = end;
                Tok::Value(Value::String(text))
            }
            c if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                let (value, end) = number(&chars, i)?;
                i = end;
                Tok::Value(value)
            }
            c if c.is_alphabetic() || c == '_' => {
                while i < chars.len() && is_word_char(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                word_token(&word, position)?
            }
            _ => {
                return Err(ThresholdError::Unexpected {
                    token: c.to_string(),
                    position,
                    expected: EXPECTED_VALUE,
                });
            }
        };
        out.push(Lexed {
            tok,
            position,
            text: chars[start..i].iter().collect(),
        });
    }
    out.push(Lexed {
        tok: Tok::End,
        position: chars.len() + 1,
        text: String::new(),
    });
    Ok(out)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-' || c == '.'
}

fn word_token(word: &str, position: usize) -> Result<Tok, ThresholdError> {
    Ok(match word {
        "and" => Tok::And,
        "or" => Tok::Or,
        "not" => Tok::Not,
        "null" => Tok::Value(Value::Null),
        "true" => Tok::Value(Value::Bool(true)),
        "false" => Tok::Value(Value::Bool(false)),
        _ => {
            let mut parts = word.split('.');
            if parts.next() != Some("result") {
                return Err(ThresholdError::UnknownWord {
                    word: word.to_string(),
                    position,
                    expected: "a path starting with result, and, or, not, null, true or false",
                });
            }
            let mut segments = Vec::new();
            for part in parts {
                let valid = !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
                if !valid {
                    return Err(ThresholdError::Unexpected {
                        token: word.to_string(),
                        position,
                        expected: "a path such as result.data.status (segments of letters, digits, _ or -)",
                    });
                }
                segments.push(part.to_string());
            }
            Tok::Path(Path { segments })
        }
    })
}

/// Reads a quoted string starting at `chars[start]`; returns it and the index after the closing quote.
fn string(chars: &[char], start: usize) -> Result<(String, usize), ThresholdError> {
    let quote = chars[start];
    let mut text = String::new();
    let mut i = start + 1;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => {
                let Some(&escaped) = chars.get(i + 1) else {
                    break;
                };
                text.push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    other => other,
                });
                i += 2;
            }
            c if c == quote => return Ok((text, i + 1)),
            c => {
                text.push(c);
                i += 1;
            }
        }
    }
    Err(ThresholdError::UnterminatedString {
        position: start + 1,
    })
}

/// Reads `-?digits(.digits)?([eE][+-]?digits)?` at `chars[start]`.
fn number(chars: &[char], start: usize) -> Result<(Value, usize), ThresholdError> {
    let digits = |mut i: usize| {
        while chars.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = if chars[start] == '-' {
        start + 1
    } else {
        start
    };
    i = digits(i);
    let mut integer = true;
    if chars.get(i) == Some(&'.') && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
        integer = false;
        i = digits(i + 1);
    }
    if matches!(chars.get(i), Some('e' | 'E')) {
        let mut j = i + 1;
        if matches!(chars.get(j), Some('+' | '-')) {
            j += 1;
        }
        if chars.get(j).is_some_and(char::is_ascii_digit) {
            integer = false;
            i = digits(j);
        }
    }
    let text: String = chars[start..i].iter().collect();
    let bad = || ThresholdError::BadNumber {
        text: text.clone(),
        position: start + 1,
    };
    let number = if integer {
        if let Ok(n) = text.parse::<i64>() {
            Number::from(n)
        } else if let Ok(n) = text.parse::<u64>() {
            Number::from(n)
        } else {
            text.parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .ok_or_else(bad)?
        }
    } else {
        text.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .and_then(Number::from_f64)
            .ok_or_else(bad)?
    };
    Ok((Value::Number(number), i))
}

struct Parser {
    tokens: Vec<Lexed>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        // The lexer always ends the list with End, and the cursor never passes it.
        self.tokens.get(self.pos).map_or(&Tok::End, |t| &t.tok)
    }

    fn advance(&mut self) {
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
    }

    fn position(&self) -> usize {
        self.tokens.get(self.pos).map_or(0, |t| t.position)
    }

    fn unexpected(&self, expected: &'static str) -> ThresholdError {
        match self.tokens.get(self.pos) {
            Some(t) if t.tok != Tok::End => ThresholdError::Unexpected {
                token: t.text.clone(),
                position: t.position,
                expected,
            },
            _ => ThresholdError::UnexpectedEnd {
                position: self.position(),
                expected,
            },
        }
    }

    fn enter(&mut self) -> Result<(), ThresholdError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ThresholdError::TooDeep {
                position: self.position(),
                max: MAX_DEPTH,
            });
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, ThresholdError> {
        let mut left = self.and()?;
        while *self.peek() == Tok::Or {
            self.advance();
            let right = self.and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ThresholdError> {
        let mut left = self.unary()?;
        while *self.peek() == Tok::And {
            self.advance();
            let right = self.unary()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ThresholdError> {
        match self.peek() {
            Tok::Not => {
                self.enter()?;
                self.advance();
                let inner = self.unary()?;
                self.depth -= 1;
                Ok(Expr::Not(Box::new(inner)))
            }
            Tok::Open => {
                self.enter()?;
                self.advance();
                let inner = self.or()?;
                if *self.peek() != Tok::Close {
                    return Err(self.unexpected("and, or or )"));
                }
                self.advance();
                self.depth -= 1;
                Ok(inner)
            }
            _ => self.comparison(),
        }
    }

    fn operand(&mut self) -> Result<Operand, ThresholdError> {
        let operand = match self.peek() {
            Tok::Path(path) => Operand::Path(path.clone()),
            Tok::Value(value) => Operand::Literal(value.clone()),
            _ => return Err(self.unexpected(EXPECTED_VALUE)),
        };
        self.advance();
        Ok(operand)
    }

    fn comparison(&mut self) -> Result<Expr, ThresholdError> {
        let left = self.operand()?;
        let op = match self.peek() {
            Tok::Op(op) => *op,
            _ => {
                return match left {
                    Operand::Path(_) | Operand::Literal(Value::Bool(_)) => Ok(Expr::Test(left)),
                    _ => Err(self.unexpected("a comparison (== != > < >= <=) after a value")),
                };
            }
        };
        self.advance();
        let right = self.operand()?;
        if matches!(self.peek(), Tok::Op(_)) {
            // `a < b < c` reads as maths but would compare a bool; say so.
            return Err(self.unexpected("and, or, ) or the end (comparisons do not chain)"));
        }
        Ok(Expr::Compare { left, op, right })
    }
}
