//! The syntax tree of a threshold expression and its normalized text form.

use std::fmt;

use serde_json::Value;

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
    pub(super) fn value<'a>(&'a self, result: &'a Value) -> &'a Value {
        match self {
            Operand::Path(path) => path.lookup(result),
            Operand::Literal(value) => value,
        }
    }

    pub(super) fn path(&self) -> Option<&Path> {
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
