//! What a tool is and what one call of it means.
//!
//! A [`ToolSpec`] holds the facts about a tool that do not change from call
//! to call (its name, description, argument schema, general risk, family,
//! aliases), made once when the tool is. A [`CallPlan`] is what the gate and
//! the runner need to know about one call with its arguments: the risk it is
//! judged by, whether only a person may approve it, its time limit, and a
//! call it will make later on the caller's behalf. Most tools' calls all
//! look alike, so [`ToolSpec::plan`] is the plan unless the tool says
//! otherwise ([`super::Tool::plan`]).

use std::borrow::Cow;
use std::time::Duration;

use cairn_core::chat::ToolDefinition;
use serde_json::{Value, json};

use super::RiskLevel;

/// The facts about a tool that every call shares.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    name: Cow<'static, str>,
    description: Cow<'static, str>,
    parameters: Value,
    risk: RiskLevel,
    family: Option<&'static str>,
    aliases: &'static [&'static str],
    reusable: bool,
    needs_person: bool,
    time_limit: Option<Duration>,
}

impl ToolSpec {
    /// A tool named `name` (lower-case ASCII letters, digits and `_`, at most
    /// 64 characters) with this general risk, described for the model. Its
    /// arguments are any object until [`Self::params`] says more; a read-only
    /// tool's answers may be reused within a turn unless
    /// [`Self::not_reusable`] says no.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        risk: RiskLevel,
        description: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object"}),
            risk,
            family: None,
            aliases: &[],
            reusable: risk == RiskLevel::ReadOnly,
            needs_person: false,
            time_limit: None,
        }
    }

    /// Sets the JSON Schema of the arguments object (see [`schema`]).
    pub fn params(mut self, schema: Value) -> Self {
        self.parameters = schema;
        self
    }

    /// Puts the tool in a family: when schemas load on demand, the prompt
    /// names a family's tools on one line with this text ([`super::offer`]).
    pub fn in_family(mut self, text: &'static str) -> Self {
        self.family = Some(text);
        self
    }

    /// Replaces the description (a tool whose text depends on its configuration).
    pub fn with_description(mut self, description: impl Into<Cow<'static, str>>) -> Self {
        self.description = description.into();
        self
    }

    /// Extra names the registry resolves to this tool.
    pub fn aliased(mut self, aliases: &'static [&'static str]) -> Self {
        self.aliases = aliases;
        self
    }

    /// Says that the same call may answer differently with nothing written
    /// in between (the time, a list that changes by itself), so the agent
    /// loop never reuses an earlier answer.
    pub fn not_reusable(mut self) -> Self {
        self.reusable = false;
        self
    }

    /// Makes every call one only a person may approve ([`CallPlan::needs_person`]).
    pub fn needs_person(mut self) -> Self {
        self.needs_person = true;
        self
    }

    /// Gives every call a time limit of its own ([`CallPlan::time_limit`]).
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// The canonical name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the tool does, for the model.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// JSON Schema of the arguments object.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// How much harm the tool can do in general (whether it changes
    /// anything at all); a call's own risk is its plan's.
    pub fn risk(&self) -> RiskLevel {
        self.risk
    }

    /// The one-line text of the tool's family, when it belongs to one.
    pub fn family(&self) -> Option<&str> {
        self.family
    }

    /// Extra names the registry resolves to this tool.
    pub fn aliases(&self) -> &[&'static str] {
        self.aliases
    }

    /// True when the same call, with nothing written in between, gives the
    /// same result, so the agent loop may reuse it later in the turn.
    pub fn reusable(&self) -> bool {
        self.reusable
    }

    /// The plan of a call whose arguments change nothing about it.
    pub fn plan(&self) -> CallPlan {
        CallPlan {
            risk: self.risk,
            needs_person: self.needs_person,
            time_limit: self.time_limit,
            delegated: None,
        }
    }

    /// What the model is told about the tool.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.to_string(),
            description: self.description.to_string(),
            parameters: self.parameters.clone(),
        }
    }
}

/// What one call with its arguments means for the gate and the runner.
#[derive(Debug, Clone, PartialEq)]
pub struct CallPlan {
    /// The risk the policy gate decides on: a tool whose harm depends on its
    /// arguments (a routine that runs a full agent job versus one that sends
    /// a reminder) answers per call.
    pub risk: RiskLevel,
    /// True when the call changes what runs on the person's behalf later
    /// (creating, changing or removing their routines, cancelling a
    /// schedule, stopping a watcher): it then runs only where a person can
    /// approve it ([`crate::runner::Approver::person_present`]), never from
    /// `/v1`, `/webhook`, a routine run, a job or background work, whatever
    /// the autonomy, and is judged as `Write` at least ([`Self::gate_risk`]).
    pub needs_person: bool,
    /// A time limit of its own, replacing the context's
    /// ([`super::ToolLimits::timeout`]); `background_wait` waits up to an
    /// hour by design.
    pub time_limit: Option<Duration>,
    /// A call the tool will make on the caller's behalf after it returns
    /// (`background_run` launching a tool). The runner passes it through
    /// the gate too, at once and with the same approver, so a tool that
    /// would ask is asked about in the turn that launches it, and a denied
    /// one is never launched.
    pub delegated: Option<DelegatedCall>,
}

impl CallPlan {
    /// The risk the gate judges the call by: its own, and `Write` at least
    /// for a call only a person may approve, so supervised autonomy asks.
    pub fn gate_risk(&self) -> RiskLevel {
        if self.needs_person {
            self.risk.max(RiskLevel::Write)
        } else {
            self.risk
        }
    }
}

/// A call a tool makes later on the caller's behalf ([`CallPlan::delegated`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DelegatedCall {
    /// The tool it calls, as named in the arguments (an alias is resolved).
    pub name: String,
    /// Its arguments; `null` counts as no arguments.
    pub arguments: Value,
}

/// JSON Schemas of argument objects, as tools declare them.
pub mod schema {
    use serde_json::{Map, Value, json};

    /// An object with these `properties` (an object of property schemas),
    /// of which `required` must be given; other properties are let through.
    pub fn object(properties: Value, required: &[&str]) -> Value {
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), properties);
        if !required.is_empty() {
            schema.insert("required".into(), json!(required));
        }
        Value::Object(schema)
    }

    /// [`object`], refusing any property it does not name
    /// (`additionalProperties: false`).
    pub fn closed(properties: Value, required: &[&str]) -> Value {
        let mut schema = object(properties, required);
        schema["additionalProperties"] = json!(false);
        schema
    }

    /// `base`'s properties with `more`'s added (both objects of property
    /// schemas), for a family whose tools share some arguments.
    pub fn with(base: Value, more: Value) -> Value {
        match (base, more) {
            (Value::Object(mut base), Value::Object(more)) => {
                base.extend(more);
                Value::Object(base)
            }
            (base, _) => base,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_plans_its_calls_and_tells_the_model_what_it_declares() {
        let spec = ToolSpec::new("t", RiskLevel::ReadOnly, "does t");
        assert!(spec.reusable(), "read-only answers are reusable by default");
        assert_eq!(spec.parameters(), &json!({"type": "object"}));
        assert_eq!(spec.plan().risk, RiskLevel::ReadOnly);
        assert!(!spec.plan().needs_person);
        let spec = ToolSpec::new("w", RiskLevel::ReadOnly, "d")
            .needs_person()
            .time_limit(Duration::from_secs(3))
            .not_reusable();
        assert!(!spec.reusable());
        let plan = spec.plan();
        assert_eq!(plan.time_limit, Some(Duration::from_secs(3)));
        assert_eq!(
            plan.gate_risk(),
            RiskLevel::Write,
            "a person's call is a write"
        );
        assert!(!ToolSpec::new("x", RiskLevel::Write, "d").reusable());
        assert_eq!(spec.definition().name, "w");
    }

    #[test]
    fn schemas_name_required_properties_only_when_there_are_some() {
        assert_eq!(
            schema::object(json!({}), &[]),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            schema::closed(json!({"a": {"type": "string"}}), &["a"]),
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false})
        );
        assert_eq!(
            schema::with(json!({"a": 1}), json!({"b": 2})),
            json!({"a": 1, "b": 2})
        );
    }
}
