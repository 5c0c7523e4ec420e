//! Splitting a threshold expression into tokens with their positions.

use serde_json::{Number, Value};

use super::{CmpOp, EXPECTED_VALUE, Path, ThresholdError};

/// A token and its 1-based character position.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
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

pub(super) struct Lexed {
    pub(super) tok: Tok,
    /// 1-based character position.
    pub(super) position: usize,
    /// The text as written, for errors.
    pub(super) text: String,
}

pub(super) fn lex(src: &str) -> Result<Vec<Lexed>, ThresholdError> {
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
