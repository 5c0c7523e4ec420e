//! A type's JSON shape as serde reads it, found by asking serde rather than
//! by reading code or schemas: a made-up name where a value goes draws
//! "unknown variant `…`, expected one of `a`, `b`" from an enum; a made-up
//! key in an object draws "unknown field `…`, expected one of …" from a
//! struct that denies unknown fields; an empty object draws "missing field
//! `type`" from an internally tagged enum, whose made-up tag then lists its
//! variants. Each field and variant found is probed the same way in place,
//! so the shape holds every field, variant and name serde accepts, nested.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// A name no type uses, put where a value goes to draw serde's list.
const PROBE: &str = "__cairn_shape_probe__";

/// How deep the probing goes (the routine types nest four levels).
const MAX_DEPTH: usize = 8;

/// What serde reads at one place of a type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// An object with these fields; `closed` when serde refuses any other.
    Object {
        /// Each field's own shape, by name.
        fields: BTreeMap<String, Shape>,
        /// Unknown fields are refused.
        closed: bool,
    },
    /// An object whose `tag` field names one of these variants.
    Tagged {
        /// The tag's field (`type`).
        tag: String,
        /// Each variant's fields (the tag aside), by the tag's value.
        variants: BTreeMap<String, Shape>,
    },
    /// One of these names (an enum of unit variants).
    Names(Vec<String>),
    /// Anything serde did not describe further: text, a number, a
    /// duration, free JSON.
    Leaf,
}

/// Deserializes a value placed at one spot of the probed type: the
/// error's message, or `None` when serde accepted it.
type Place<'a> = &'a dyn Fn(Value) -> Option<String>;

/// The shape of `T`.
pub fn shape_of<T: DeserializeOwned>() -> Shape {
    let root = |value: Value| {
        serde_json::from_value::<T>(value)
            .err()
            .map(|e| e.to_string())
    };
    probe(&root, MAX_DEPTH)
}

fn probe(place: Place<'_>, depth: usize) -> Shape {
    if depth == 0 {
        return Shape::Leaf;
    }
    if let Some(names) = place(json!(PROBE)).and_then(|e| listed(&e, "variant")) {
        return Shape::Names(names);
    }
    if let Some(fields) = place(json!({ PROBE: 0 })).and_then(|e| listed(&e, "field")) {
        let fields = fields
            .into_iter()
            .map(|field| {
                let inner = |value: Value| place(json!({ field.as_str(): value }));
                let shape = probe(&inner, depth - 1);
                (field, shape)
            })
            .collect();
        return Shape::Object {
            fields,
            closed: true,
        };
    }
    let Some(tag) = place(json!({})).and_then(|e| missing(&e)) else {
        return Shape::Leaf;
    };
    let Some(names) = place(json!({ tag.as_str(): PROBE })).and_then(|e| listed(&e, "variant"))
    else {
        return Shape::Leaf;
    };
    let variants = names
        .into_iter()
        .map(|name| {
            let with_tag = |mut fields: Map<String, Value>| {
                fields.insert(tag.clone(), json!(name));
                place(Value::Object(fields))
            };
            let shape = variant(&with_tag, depth - 1);
            (name, shape)
        })
        .collect();
    Shape::Tagged { tag, variants }
}

/// A tagged variant's fields: `with_tag` deserializes an object with the
/// variant's tag added.
fn variant(with_tag: &dyn Fn(Map<String, Value>) -> Option<String>, depth: usize) -> Shape {
    let one = |key: &str, value: Value| {
        let mut fields = Map::new();
        fields.insert(key.to_string(), value);
        with_tag(fields)
    };
    match one(PROBE, json!(0)) {
        Some(error) => match listed(&error, "field") {
            Some(names) => Shape::Object {
                fields: names
                    .into_iter()
                    .map(|field| {
                        let inner = |value: Value| one(&field, value);
                        let shape = probe(&inner, depth);
                        (field, shape)
                    })
                    .collect(),
                closed: true,
            },
            // Refused for another reason (a required field): open, fields unknown.
            None => Shape::Object {
                fields: BTreeMap::new(),
                closed: false,
            },
        },
        // Accepted: a unit variant, which serde lets carry anything.
        None => Shape::Object {
            fields: BTreeMap::new(),
            closed: false,
        },
    }
}

/// The names serde's "unknown {kind} `PROBE`, expected …" lists, when
/// `error` is that message about the probe (an empty list for "there are
/// no fields").
fn listed(error: &str, kind: &str) -> Option<Vec<String>> {
    let rest = error.strip_prefix(&format!("unknown {kind} `{PROBE}`, "))?;
    if rest.starts_with("there are no") {
        return Some(Vec::new());
    }
    let rest = rest.strip_prefix("expected ")?;
    Some(
        rest.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

/// The field serde's "missing field `x`" names.
fn missing(error: &str) -> Option<String> {
    let rest = error.strip_prefix("missing field `")?;
    rest.strip_suffix('`').map(str::to_string)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only probed")]
    struct Outer {
        #[serde(default)]
        kind: Option<Kind>,
        inner: Inner,
        #[serde(default)]
        text: String,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        One,
        TwoWords,
    }

    #[derive(Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    #[expect(dead_code, reason = "only probed")]
    enum Inner {
        Plain,
        Full { count: u32, kind: Kind },
    }

    #[test]
    fn serde_describes_fields_variants_and_names_nested() {
        let names = Shape::Names(vec!["one".into(), "two_words".into()]);
        let inner = Shape::Tagged {
            tag: "type".into(),
            variants: BTreeMap::from([
                (
                    "plain".into(),
                    Shape::Object {
                        fields: BTreeMap::new(),
                        closed: false,
                    },
                ),
                (
                    "full".into(),
                    Shape::Object {
                        fields: BTreeMap::from([
                            ("count".into(), Shape::Leaf),
                            ("kind".into(), names.clone()),
                        ]),
                        closed: true,
                    },
                ),
            ]),
        };
        assert_eq!(
            shape_of::<Outer>(),
            Shape::Object {
                fields: BTreeMap::from([
                    ("kind".into(), names),
                    ("inner".into(), inner),
                    ("text".into(), Shape::Leaf),
                ]),
                closed: true,
            }
        );
    }

    #[test]
    fn the_lists_of_every_length_are_read() {
        let one = format!("unknown field `{PROBE}`, expected `a`");
        let two = format!("unknown field `{PROBE}`, expected `a` or `b`");
        let many = format!("unknown variant `{PROBE}`, expected one of `a`, `b`, `c`");
        let none = format!("unknown field `{PROBE}`, there are no fields");
        assert_eq!(listed(&one, "field").unwrap(), ["a"]);
        assert_eq!(listed(&two, "field").unwrap(), ["a", "b"]);
        assert_eq!(listed(&many, "variant").unwrap(), ["a", "b", "c"]);
        assert_eq!(listed(&none, "field").unwrap(), Vec::<String>::new());
        assert_eq!(listed("unknown field `other`, expected `a`", "field"), None);
        assert_eq!(missing("missing field `type`").unwrap(), "type");
    }
}
