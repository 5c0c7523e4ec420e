//! The identity of a tool call within a turn: canonical tool name plus
//! canonical arguments (object keys sorted at every depth), so the same call
//! written twice runs once.

use serde_json::Value;

/// `name(args)` with keys sorted, as a comparable string.
pub fn call_signature(canonical_name: &str, arguments: &Value) -> String {
    let mut out = String::with_capacity(64);
    out.push_str(canonical_name);
    out.push('(');
    write_canonical(arguments, &mut out);
    out.push(')');
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter() {
        let a = call_signature(
            "shell",
            &json!({"command": "ls", "opts": {"a": 1, "b": [1, {"y": 2, "x": 1}]}}),
        );
        let b = call_signature(
            "shell",
            &json!({"opts": {"b": [1, {"x": 1, "y": 2}], "a": 1}, "command": "ls"}),
        );
        assert_eq!(a, b);
        assert_ne!(a, call_signature("shell", &json!({"command": "ls -l"})));
        assert_ne!(
            call_signature("a", &json!({})),
            call_signature("b", &json!({}))
        );
    }
}
