//! Calls written as JSON objects (`{"name": …, "arguments": …}`, an array of
//! them, or OpenAI's `{"function": {…}}` shape), shared by every format that
//! carries JSON.

use cairn_core::chat::ToolCall;
use serde_json::{Map, Value};

use super::new_call_id;

/// Which names a format accepts.
#[derive(Clone, Copy)]
pub(super) enum Acceptance<'a> {
    /// Explicit tool-call markup: any name, arguments optional.
    Any,
    /// Ambiguous markup: only offered names, arguments required.
    Known(&'a [&'a str]),
}

/// The calls in `code` (trimmed), or `None` when it is not call JSON.
pub(super) fn parse_calls(code: &str, acceptance: Acceptance<'_>) -> Option<Vec<ToolCall>> {
    let value: Value = serde_json::from_str(code.trim()).ok()?;
    calls_from_value(&value, acceptance)
}

/// The calls one JSON value holds: an object, or a non-empty array of them.
pub(super) fn calls_from_value(value: &Value, acceptance: Acceptance<'_>) -> Option<Vec<ToolCall>> {
    match value {
        Value::Object(obj) => Some(vec![call_from_object(obj, acceptance)?]),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|item| call_from_object(item.as_object()?, acceptance))
            .collect(),
        _ => None,
    }
}

const ARGUMENT_KEYS: [&str; 4] = ["arguments", "parameters", "args", "input"];

fn call_from_object(obj: &Map<String, Value>, acceptance: Acceptance<'_>) -> Option<ToolCall> {
    // OpenAI-shaped `{"function": {"name": …, "arguments": …}}` written as text.
    if let Some(Value::Object(function)) = obj.get("function") {
        let mut call = call_from_object(function, acceptance)?;
        if let Some(Value::String(id)) = obj.get("id") {
            call.id = id.clone();
        }
        return Some(call);
    }
    let name = ["name", "tool", "tool_name"]
        .iter()
        .find_map(|key| obj.get(*key)?.as_str())
        .map(str::trim)
        .filter(|name| !name.is_empty())?;
    let raw_args = ARGUMENT_KEYS.iter().find_map(|key| obj.get(*key));
    if let Acceptance::Known(known) = acceptance
        && (raw_args.is_none() || !known.contains(&name))
    {
        return None;
    }
    let id = match obj.get("id") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        _ => new_call_id(),
    };
    Some(ToolCall {
        id,
        name: name.to_owned(),
        arguments: normalize_arguments(raw_args.cloned()),
    })
}

/// Arguments as a JSON value: strings holding JSON are decoded, absent or
/// null become `{}`, and undecodable strings stay strings so the tool can
/// report them.
pub fn normalize_arguments(raw: Option<Value>) -> Value {
    match raw {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Map::new()),
        Some(Value::String(s)) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        Some(other) => other,
    }
}

/// The JSON object of a format that writes the name apart from the
/// arguments (`NAME {…}`): an object, or nothing at all for `{}`.
pub(super) fn arguments_object(code: &str) -> Option<Value> {
    let code = strip_fence(code).trim();
    if code.is_empty() {
        return Some(Value::Object(Map::new()));
    }
    match serde_json::from_str(code).ok()? {
        Value::Object(map) => Some(Value::Object(map)),
        _ => None,
    }
}

/// The first JSON value of `text` (leading whitespace skipped) and the
/// bytes it took; text after it is left alone.
pub(super) fn leading_value(text: &str) -> Option<(Value, usize)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let value = values.next()?.ok()?;
    Some((value, values.byte_offset()))
}

/// The code inside a ```` ``` ```` fence some models put around JSON
/// (`body` trimmed; without a fence, `body` trimmed).
pub(super) fn strip_fence(body: &str) -> &str {
    let trimmed = body.trim();
    let Some(inner) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let inner = inner.strip_suffix("```").unwrap_or(inner);
    match inner.split_once('\n') {
        Some((_lang, code)) => code,
        None => inner,
    }
}
