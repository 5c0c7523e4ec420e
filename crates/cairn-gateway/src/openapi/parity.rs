//! Does the served document describe every part of a routine spec? The
//! fields, trigger types, action types and names `RoutineSpec` accepts are
//! found by asking serde ([`shape`](super::shape)), never listed by hand,
//! and looked up wherever the document holds a spec ([`SPEC_PLACES`]):
//! whatever the core gains, the document must show, or [`routine_gaps`]
//! names what it lacks.

use serde_json::Value;

use super::shape::{Shape, shape_of};
use cairn_core::routine::RoutineSpec;

/// Where the document holds a routine spec: a name for messages, the
/// pointer to a schema, and the field of that schema holding the spec
/// (none when the schema is the spec). The bodies of the routes that take
/// one, and the routine one answers with.
pub const SPEC_PLACES: [(&str, &str, Option<&str>); 3] = [
    (
        "POST /api/routines",
        "/paths/~1api~1routines/post/requestBody/content/application~1json/schema",
        None,
    ),
    (
        "PUT /api/routines/{id}",
        "/paths/~1api~1routines~1{id}/put/requestBody/content/application~1json/schema",
        None,
    ),
    (
        "GET /api/routines/{id}",
        "/paths/~1api~1routines~1{id}/get/responses/200/content/application~1json/schema",
        Some("spec"),
    ),
];

/// How deep `$ref`s, `oneOf`s and `allOf`s are followed.
const MAX_HOPS: usize = 16;

/// The shape of a routine spec, as serde reads it.
pub fn routine_shape() -> Shape {
    shape_of::<RoutineSpec>()
}

/// Every field, variant or name of a routine spec that `doc` (the served
/// document) leaves out of a place holding a spec, one line each; empty
/// when none.
pub fn routine_gaps(doc: &Value) -> Vec<String> {
    let shape = routine_shape();
    let mut gaps = Vec::new();
    for (at, pointer, field) in SPEC_PLACES {
        let Some(schema) = doc.pointer(pointer) else {
            gaps.push(format!("{at}: no JSON schema at {pointer}"));
            continue;
        };
        let mut alts = alternatives(doc, schema);
        if let Some(field) = field {
            alts = alts
                .iter()
                .filter_map(|s| s.get("properties").and_then(|p| p.get(field)))
                .flat_map(|s| alternatives(doc, s))
                .collect();
        }
        if alts.is_empty() {
            gaps.push(format!("{at}: no routine spec schema"));
        } else {
            check(doc, &shape, &alts, at, &mut gaps);
        }
    }
    gaps
}

/// The concrete schemas `schema` stands for: `$ref`s followed, `oneOf`,
/// `anyOf` and `allOf` members spread, the `null` of an option dropped.
fn alternatives<'a>(doc: &'a Value, schema: &'a Value) -> Vec<&'a Value> {
    let mut out = Vec::new();
    spread(doc, schema, MAX_HOPS, &mut out);
    out
}

fn spread<'a>(doc: &'a Value, schema: &'a Value, hops: usize, out: &mut Vec<&'a Value>) {
    if hops == 0 {
        return;
    }
    if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        if let Some(found) = target.strip_prefix('#').and_then(|p| doc.pointer(p)) {
            spread(doc, found, hops - 1, out);
        }
        return;
    }
    let mut composed = false;
    for key in ["oneOf", "anyOf", "allOf"] {
        for member in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            composed = true;
            spread(doc, member, hops - 1, out);
        }
    }
    let null_only = schema.get("type").and_then(Value::as_str) == Some("null");
    // A composed schema counts itself only when it also says something of its own.
    let own = ["properties", "enum", "const"]
        .iter()
        .any(|key| schema.get(key).is_some());
    if !null_only && (!composed || own) {
        out.push(schema);
    }
}

/// The values an alternative allows for a name: its `enum`, or its `const`.
fn names_in(schema: &Value) -> Vec<&str> {
    let listed = schema
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    listed
        .chain(schema.get("const"))
        .filter_map(Value::as_str)
        .collect()
}

fn check(doc: &Value, shape: &Shape, alts: &[&Value], at: &str, gaps: &mut Vec<String>) {
    match shape {
        Shape::Leaf => {}
        Shape::Names(names) => {
            let shown: Vec<&str> = alts.iter().flat_map(|s| names_in(s)).collect();
            for name in names {
                if !shown.contains(&name.as_str()) {
                    gaps.push(format!("{at}: the value `{name}` is missing"));
                }
            }
        }
        Shape::Object { fields, closed } => {
            if *closed
                && !alts
                    .iter()
                    .any(|s| s.get("additionalProperties") == Some(&false.into()))
            {
                gaps.push(format!(
                    "{at}: unknown fields are refused, but the schema allows them"
                ));
            }
            for (field, inner) in fields {
                let found: Vec<&Value> = alts
                    .iter()
                    .filter_map(|s| s.get("properties").and_then(|p| p.get(field)))
                    .flat_map(|s| alternatives(doc, s))
                    .collect();
                if found.is_empty() {
                    gaps.push(format!("{at}: the field `{field}` is missing"));
                } else {
                    check(doc, inner, &found, &format!("{at}.{field}"), gaps);
                }
            }
        }
        Shape::Tagged { tag, variants } => {
            for (name, inner) in variants {
                // The members whose tag property allows this variant's name.
                let members: Vec<&Value> = alts
                    .iter()
                    .copied()
                    .filter(|s| {
                        s.get("properties")
                            .and_then(|p| p.get(tag))
                            .is_some_and(|t| {
                                alternatives(doc, t)
                                    .iter()
                                    .any(|t| names_in(t).contains(&name.as_str()))
                            })
                    })
                    .collect();
                if members.is_empty() {
                    gaps.push(format!("{at}: the {tag} `{name}` is missing"));
                } else {
                    check(doc, inner, &members, &format!("{at}[{name}]"), gaps);
                }
            }
        }
    }
}
