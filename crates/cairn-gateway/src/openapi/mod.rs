//! The served OpenAPI document, finished for client generators: each
//! object member of an inline `oneOf` (the variants of a tagged enum such
//! as a routine's trigger and action) becomes a named component,
//! `{Parent}{Variant}`, since generators drop or mangle inline members.
//! The routine schemas come from cairn-core (its `openapi` feature);
//! [`parity`] checks the document against what serde reads ([`shape`]).

use serde_json::{Map, Value, json};

pub mod parity;
pub mod shape;

/// The document as served.
pub fn finish(doc: &utoipa::openapi::OpenApi) -> Value {
    let mut value = serde_json::to_value(doc).unwrap_or(Value::Null);
    if let Some(schemas) = value
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        name_members(schemas);
    }
    value
}

/// Moves inline object members of each schema's `oneOf` into components.
fn name_members(schemas: &mut Map<String, Value>) {
    let mut hoisted = Vec::new();
    for (name, schema) in schemas.iter_mut() {
        let Some(members) = schema.get_mut("oneOf").and_then(Value::as_array_mut) else {
            continue;
        };
        for (i, member) in members.iter_mut().enumerate() {
            if member.get("$ref").is_some() || !is_object(member) {
                continue;
            }
            let variant = member
                .pointer("/properties/type/enum/0")
                .and_then(Value::as_str)
                .map_or_else(|| format!("Variant{i}"), pascal);
            let member_name = format!("{name}{variant}");
            let reference = json!({"$ref": format!("#/components/schemas/{member_name}")});
            hoisted.push((member_name, std::mem::replace(member, reference)));
        }
    }
    for (name, schema) in hoisted {
        schemas.insert(name, schema);
    }
}

fn is_object(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("object")) || schema.get("properties").is_some()
}

/// `tool_call` → `ToolCall`.
fn pascal(snake: &str) -> String {
    snake
        .split(['_', '-', '.'])
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_members_become_named_components() {
        let mut schemas = json!({
            "RoutineAction": {"oneOf": [
                {"type": "object", "properties": {"type": {"type": "string", "enum": ["tool_call"]}}},
                {"$ref": "#/components/schemas/Other"},
                {"type": "string"}
            ]}
        });
        name_members(schemas.as_object_mut().unwrap());
        assert_eq!(
            schemas["RoutineAction"]["oneOf"][0],
            json!({"$ref": "#/components/schemas/RoutineActionToolCall"})
        );
        assert_eq!(
            schemas["RoutineActionToolCall"]["properties"]["type"]["enum"][0],
            "tool_call"
        );
        assert_eq!(
            schemas["RoutineAction"]["oneOf"][2],
            json!({"type": "string"})
        );
    }
}
