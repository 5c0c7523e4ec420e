//! `${NAME}` in free-form tables (`[channels.NAME]`, `[[mcp.servers]]`):
//! replaced with the environment variable's value (`${secret:NAME}` with
//! the vault's), an unset one an error naming the key and the variable.
//! The one implementation every table uses.

use serde_json::Value;

use crate::text::{Vars, missing_reference};

/// An unset variable: the key of the string that names it, and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsetVariable {
    /// Dotted key of the string (`channels.phone.bot_token`, `mcp.servers[0].env.TOKEN`).
    pub key: String,
    /// The variable's name.
    pub variable: String,
}

impl std::fmt::Display for UnsetVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, missing_reference(&self.variable))
    }
}

/// Replaces `${NAME}` in every string of `value` (keys of objects are left
/// alone) with the variable's value in `env`; every unset one is reported,
/// named by `key` and the path below it.
pub fn expand_env(
    value: &mut Value,
    key: &str,
    env: &(impl Vars + ?Sized),
    unset: &mut Vec<UnsetVariable>,
) {
    match value {
        Value::String(s) => match crate::text::expand_vars(s, env) {
            Ok(expanded) => *s = expanded,
            Err(variable) => unset.push(UnsetVariable {
                key: key.to_string(),
                variable,
            }),
        },
        Value::Object(map) => {
            for (field, v) in map.iter_mut() {
                expand_env(v, &format!("{key}.{field}"), env, unset);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                expand_env(v, &format!("{key}[{i}]"), env, unset);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_unset_variable_is_named_with_its_key() {
        let mut v = json!({"env": {"T": "${T}"}, "args": ["-k", "${K}"], "h": "${secret:GH}"});
        let mut unset = Vec::new();
        expand_env(&mut v, "mcp.servers[0]", &env(&[]), &mut unset);
        let shown: Vec<String> = unset.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "mcp.servers[0].args[1]: environment variable K is not set",
                "mcp.servers[0].env.T: environment variable T is not set",
                "mcp.servers[0].h: secret GH is not in the vault (add it with `cairn secret set GH`)",
            ]
        );
        let mut v = json!({"env": {"T": "${T}"}});
        expand_env(&mut v, "x", &env(&[("T", "s")]), &mut unset);
        assert_eq!(v, json!({"env": {"T": "s"}}));
    }
}
