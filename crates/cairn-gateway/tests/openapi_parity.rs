//! The served OpenAPI document shows every field, trigger type, action type
//! and name a routine spec may hold: the list comes from serde reading
//! cairn-core's types (`cairn_gateway::openapi::parity`), so a variant or
//! field added to the core and not to the document fails here. The check
//! itself is shown to catch the removal of each action type, each trigger
//! type and each guardrail it derives, a value of each guardrail that is a
//! set of names, and the guardrails' refusal of unknown fields.
#![expect(clippy::unwrap_used, reason = "test fixtures outside #[test] fns")]

mod support;

use std::collections::BTreeMap;

use cairn_gateway::openapi::parity::{routine_gaps, routine_shape};
use cairn_gateway::openapi::shape::Shape;
use serde_json::Value;
use support::TestGateway;

/// The fields of an object shape.
fn fields(shape: &Shape) -> &BTreeMap<String, Shape> {
    match shape {
        Shape::Object { fields, .. } => fields,
        other => panic!("not an object: {other:?}"),
    }
}

/// The tag and variants of a tagged shape.
fn variants(shape: &Shape) -> (&str, Vec<&str>) {
    match shape {
        Shape::Tagged { tag, variants } => (tag, variants.keys().map(String::as_str).collect()),
        other => panic!("not a tagged union: {other:?}"),
    }
}

/// The component `schema` refers to (`schema` itself when inline).
fn target<'a>(doc: &'a mut Value, schema: &Value) -> &'a mut Value {
    let name = schema["$ref"].as_str().unwrap().rsplit('/').next().unwrap();
    &mut doc["components"]["schemas"][name]
}

/// `doc` without the member of the spec's `field` union whose `tag` is `name`.
fn without_variant(doc: &Value, field: &str, tag: &str, name: &str) -> Value {
    let mut doc = doc.clone();
    let union = doc["components"]["schemas"]["RoutineSpec"]["properties"][field].clone();
    let members = target(&mut doc, &union)["oneOf"]
        .as_array()
        .unwrap()
        .clone();
    let kept: Vec<Value> = members
        .into_iter()
        .filter(|m| {
            let member = target(&mut doc.clone(), m).clone();
            member["properties"][tag]["enum"][0] != name
        })
        .collect();
    target(&mut doc, &union)["oneOf"] = Value::Array(kept);
    doc
}

/// The guardrails' component in `doc`.
fn guardrails_of(doc: &mut Value) -> &mut Value {
    let guardrails =
        doc["components"]["schemas"]["RoutineSpec"]["properties"]["guardrails"].clone();
    target(doc, &guardrails)
}

/// `doc` without the guardrail `name`.
fn without_guardrail(doc: &Value, name: &str) -> Value {
    let mut doc = doc.clone();
    let properties = guardrails_of(&mut doc)["properties"]
        .as_object_mut()
        .unwrap();
    assert!(properties.remove(name).is_some(), "no guardrail {name}");
    doc
}

/// `doc` without the value `value` of the guardrail `name` (an enum it refers to).
fn without_value(doc: &Value, name: &str, value: &str) -> Value {
    let mut doc = doc.clone();
    let field = guardrails_of(&mut doc)["properties"][name].clone();
    let reference = field["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m.get("$ref").is_some())
        .unwrap()
        .clone();
    let values = target(&mut doc, &reference)["enum"].as_array_mut().unwrap();
    values.retain(|v| v != value);
    doc
}

#[tokio::test]
async fn the_served_document_shows_every_part_of_a_routine_spec() {
    let gw = TestGateway::start().await;
    let doc: Value = gw
        .get("/api/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    gw.stop().await;
    let gaps = routine_gaps(&doc);
    assert!(gaps.is_empty(), "the document lacks:\n{}", gaps.join("\n"));
    // What is built in is what is served.
    assert_eq!(doc, cairn_gateway::server::openapi_json());

    // The check catches each removal it could face, each one derived.
    let shape = routine_shape();
    let spec = fields(&shape);
    let mut planted = 0;
    for union in ["trigger", "action"] {
        let (tag, names) = variants(&spec[union]);
        assert!(names.len() > 1, "{union}: {names:?}");
        for name in names {
            let gaps = routine_gaps(&without_variant(&doc, union, tag, name));
            let said = format!("POST /api/routines.{union}: the {tag} `{name}` is missing");
            assert!(gaps.contains(&said), "{said} not in {gaps:#?}");
            planted += 1;
        }
    }
    let guardrails = fields(&spec["guardrails"]);
    assert!(guardrails.len() > 1, "{guardrails:?}");
    for name in guardrails.keys() {
        let gaps = routine_gaps(&without_guardrail(&doc, name));
        for at in ["PUT /api/routines/{id}", "GET /api/routines/{id}"] {
            let said = format!("{at}.guardrails: the field `{name}` is missing");
            assert!(gaps.contains(&said), "{said} not in {gaps:#?}");
        }
        planted += 1;
    }
    let mut names = 0;
    for (name, inner) in guardrails {
        let Shape::Names(values) = inner else {
            continue;
        };
        names += 1;
        let gaps = routine_gaps(&without_value(&doc, name, &values[0]));
        let said = format!(
            "POST /api/routines.guardrails.{name}: the value `{}` is missing",
            values[0]
        );
        assert!(gaps.contains(&said), "{said} not in {gaps:#?}");
        planted += 1;
    }
    assert!(names > 0, "no guardrail is a set of names: {guardrails:?}");
    let mut open = doc.clone();
    guardrails_of(&mut open)
        .as_object_mut()
        .unwrap()
        .remove("additionalProperties");
    let said =
        "POST /api/routines.guardrails: unknown fields are refused, but the schema allows them";
    assert!(routine_gaps(&open).contains(&said.to_string()));
    eprintln!("parity: {} planted removals, each caught", planted + 1);
}
