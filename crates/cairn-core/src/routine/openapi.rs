//! What utoipa's derive cannot say about the routine types' schemas
//! (feature `openapi`): serde's `deny_unknown_fields` on an internally
//! tagged enum refuses unknown fields in each variant, but the derive
//! closes only structs. [`TriggerSchema`] and [`RoutineActionSchema`] are
//! the derived schemas with every variant closed too, under the same
//! names; [`RoutineSpec`](super::RoutineSpec) refers to them.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::{RoutineAction, Trigger};

/// `schema` with each object member of its `oneOf` closed to unknown fields.
fn closed_variants(schema: RefOr<Schema>) -> RefOr<Schema> {
    match schema {
        RefOr::T(Schema::OneOf(mut one_of)) => {
            for member in &mut one_of.items {
                if let RefOr::T(Schema::Object(object)) = member {
                    object.additional_properties =
                        Some(Box::new(AdditionalProperties::FreeForm(false)));
                }
            }
            RefOr::T(Schema::OneOf(one_of))
        }
        other => other,
    }
}

/// Declares a schema type standing for `$ty` with its variants closed.
macro_rules! closed {
    ($(#[$doc:meta])* $name:ident for $ty:ty) => {
        $(#[$doc])*
        pub struct $name;

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                closed_variants(<$ty as PartialSchema>::schema())
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                <$ty as ToSchema>::name()
            }

            fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
                <$ty as ToSchema>::schemas(schemas);
            }
        }
    };
}

closed!(
    /// [`Trigger`]'s schema, each trigger type closed to unknown fields.
    TriggerSchema for Trigger
);
closed!(
    /// [`RoutineAction`]'s schema, each action type closed to unknown fields.
    RoutineActionSchema for RoutineAction
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every member of `T`'s `oneOf`, as JSON.
    fn members<T: PartialSchema>() -> Vec<serde_json::Value> {
        let schema = serde_json::to_value(T::schema()).unwrap();
        schema["oneOf"].as_array().unwrap().clone()
    }

    #[test]
    fn every_variant_is_closed_as_serde_closes_it() {
        for member in members::<TriggerSchema>()
            .into_iter()
            .chain(members::<RoutineActionSchema>())
        {
            assert_eq!(member["additionalProperties"], false, "{member}");
        }
        assert_eq!(members::<TriggerSchema>().len(), members::<Trigger>().len());
        assert_eq!(TriggerSchema::name(), "Trigger");
        assert_eq!(RoutineActionSchema::name(), "RoutineAction");
        // What the closing says: serde refuses an unknown field in a variant.
        let refused = serde_json::from_value::<RoutineAction>(serde_json::json!({
            "type": "watch", "tool": "http", "intervl": "5m"
        }));
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("unknown field `intervl`")
        );
    }

    #[test]
    fn the_name_schema_says_what_validation_checks() {
        let schema = serde_json::to_value(super::super::RoutineSpec::schema()).unwrap();
        let name = &schema["properties"]["name"];
        let pattern = regex::Regex::new(name["pattern"].as_str().unwrap()).unwrap();
        let longest = name["maxLength"].as_u64().unwrap() as usize;
        let long = "a".repeat(longest);
        let too_long = "a".repeat(longest + 1);
        for candidate in [
            "morning-brief",
            "a",
            "9.x_y",
            &long,
            &too_long,
            "",
            "-a",
            ".a",
            "a b",
            "a/b",
            "é",
        ] {
            let mut spec: super::super::RoutineSpec = serde_json::from_value(serde_json::json!({
                "name": candidate,
                "trigger": {"type": "manual"},
                "action": {"type": "notification", "message": "hi"}
            }))
            .unwrap();
            spec.name = candidate.to_string();
            let valid = spec
                .validate()
                .map_or_else(|e| !e.0.iter().any(|p| p.path == "name"), |()| true);
            let described = pattern.is_match(candidate) && candidate.chars().count() <= longest;
            assert_eq!(described, valid, "{candidate:?}");
        }
    }
}
