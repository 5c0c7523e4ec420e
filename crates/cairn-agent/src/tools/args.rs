//! Reading a call's arguments: each reader takes one key of the arguments
//! object and says, in a [`ToolError::InvalidArguments`] the model can act
//! on, which key is wrong and how. Shared by every crate's tools, so one
//! mistake reads the same whichever tool it is made with.

use serde_json::{Value, json};

use super::ToolError;

/// An optional string; a present non-string value is an error.
pub fn opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ToolError::InvalidArguments(format!(
            "`{key}` must be a string, got {}",
            json_type(other)
        ))),
    }
}

/// A required string (possibly empty).
pub fn req_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    opt_str(args, key)?
        .ok_or_else(|| ToolError::InvalidArguments(format!("missing required string `{key}`")))
}

/// A required string with something in it besides white space; anything
/// else is "missing".
pub fn nonblank<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        _ => Err(ToolError::InvalidArguments(format!(
            "missing required string `{key}`"
        ))),
    }
}

/// An optional boolean.
pub fn opt_bool(args: &Value, key: &str) -> Result<Option<bool>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ToolError::InvalidArguments(format!(
            "`{key}` must be a boolean, got {}",
            json_type(other)
        ))),
    }
}

/// An optional non-negative integer.
pub fn opt_u64(args: &Value, key: &str) -> Result<Option<u64>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "`{key}` must be a non-negative integer, got {}",
                json_type(v)
            ))
        }),
    }
}

/// A count from 1 to `max`, `default` when absent.
pub fn count(args: &Value, key: &str, default: u64, max: u64) -> Result<u64, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_u64().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
            ToolError::InvalidArguments(format!("`{key}` must be an integer from 1 to {max}"))
        }),
    }
}

/// An optional object (the arguments of a call a tool passes on), `{}`
/// when absent.
pub fn object_or_empty(args: &Value, key: &str) -> Result<Value, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(json!({})),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(_) => Err(ToolError::InvalidArguments(format!(
            "`{key}` must be an object"
        ))),
    }
}

/// The JSON type name of a value, for error messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: ToolError) -> String {
        match e {
            ToolError::InvalidArguments(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn readers_name_the_key_and_what_it_must_be() {
        let args = json!({"s": " ", "n": 7, "o": {"a": 1}, "b": true});
        assert_eq!(req_str(&args, "s").unwrap(), " ");
        assert_eq!(
            message(nonblank(&args, "s").unwrap_err()),
            "missing required string `s`"
        );
        assert_eq!(
            message(opt_str(&args, "n").unwrap_err()),
            "`n` must be a string, got a number"
        );
        assert_eq!(opt_bool(&args, "b").unwrap(), Some(true));
        assert_eq!(opt_u64(&args, "n").unwrap(), Some(7));
        assert_eq!(count(&args, "absent", 5, 10).unwrap(), 5);
        assert_eq!(
            message(count(&args, "n", 5, 6).unwrap_err()),
            "`n` must be an integer from 1 to 6"
        );
        assert_eq!(object_or_empty(&args, "absent").unwrap(), json!({}));
        assert_eq!(object_or_empty(&args, "o").unwrap(), json!({"a": 1}));
        assert_eq!(
            message(object_or_empty(&args, "n").unwrap_err()),
            "`n` must be an object"
        );
    }
}
