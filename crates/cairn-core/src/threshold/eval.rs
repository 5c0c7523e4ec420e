//! Evaluating a threshold expression against a tool's JSON result.

use std::cmp::Ordering;

use serde_json::{Number, Value};

use super::{CmpOp, Expr, Path, ThresholdError};

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
