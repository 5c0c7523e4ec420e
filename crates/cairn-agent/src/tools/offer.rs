//! Which tool schemas a model request carries.
//!
//! Every schema in every request costs tokens on every call: with forty tools
//! the first request for "hi" would be 15 KB. A registry with the schema tool
//! ([`ToolRegistry::enable_schema_tool`]) sends only its core tools' schemas
//! (the built-ins most turns need), `tool_schema`, and the schemas of tools the
//! conversation has already loaded or called; the system prompt names every
//! other tool with a short line. The model loads what it needs with
//! `tool_schema`, and from then on those tools are offered like core ones.
//! Calling a tool is unaffected: the runner and its policy gate judge every
//! call, offered or not.
//!
//! A registry without the schema tool offers everything (tests, small sets).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use async_trait::async_trait;
use cairn_core::chat::{ChatMessage, ToolDefinition};
use serde_json::{Value, json};

use super::{
    CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec,
    schema,
};
use crate::runner::Authorized;

/// The name of the tool that loads schemas.
pub const SCHEMA_TOOL: &str = "tool_schema";

/// Most characters of a tool's line in the prompt when its schema is not sent.
pub const SUMMARY_CHARS: usize = 64;

/// The tools a request offers: core ones, the schema tool, and those the
/// conversation loaded (named in a `tool_schema` call) or called.
pub(super) fn offered(registry: &ToolRegistry, messages: &[ChatMessage]) -> Vec<ToolDefinition> {
    let mut wanted: BTreeSet<String> = registry.core_names().map(str::to_string).collect();
    wanted.insert(SCHEMA_TOOL.to_string());
    let canonical = |name: &str| {
        registry
            .get(name)
            .map(|tool| tool.spec().name().to_string())
    };
    for call in messages.iter().flat_map(|m| &m.tool_calls) {
        let Some(name) = canonical(&call.name) else {
            continue;
        };
        if name == SCHEMA_TOOL {
            wanted.extend(
                requested(&call.arguments)
                    .iter()
                    .filter_map(|n| canonical(n)),
            );
        }
        wanted.insert(name);
    }
    registry
        .definitions()
        .into_iter()
        .filter(|d| wanted.contains(&d.name))
        .collect()
}

/// The prompt's lines naming the tools whose schemas are not sent: one per
/// family (members brace-grouped by prefix) and one per other tool, with a
/// [`summary`] of its description.
pub(super) fn listing(registry: &ToolRegistry, hidden: &dyn Fn(&str) -> bool) -> Vec<String> {
    let always: BTreeSet<String> = registry.always_offered().into_iter().collect();
    let mut families: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut lines = Vec::new();
    for tool in registry.own() {
        let spec = tool.spec();
        let name = spec.name().to_string();
        if always.contains(&name) || hidden(&name) {
            continue;
        }
        match spec.family() {
            Some(text) => families.entry(text.to_string()).or_default().push(name),
            None => lines.push(format!("- {name}: {}", summary(spec.description()))),
        }
    }
    for (text, names) in families {
        lines.push(format!("- {}: {text}", grouped(&names)));
    }
    lines.sort();
    lines
}

/// `a_x, a_y, b` as `a_{x,y}, b`: names sharing the part before their first
/// `_` are braced together.
fn grouped(names: &[String]) -> String {
    let mut by_prefix: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for name in names {
        let (prefix, rest) = name.split_once('_').unwrap_or((name, ""));
        by_prefix.entry(prefix).or_default().push(rest);
    }
    by_prefix
        .into_iter()
        .map(|(prefix, rests)| match rests.as_slice() {
            [""] => prefix.to_string(),
            [one] => format!("{prefix}_{one}"),
            many => format!("{prefix}_{{{}}}", many.join(",")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first sentence of a description, at most [`SUMMARY_CHARS`], cut at a word.
pub fn summary(description: &str) -> String {
    let line = description.lines().next().unwrap_or_default().trim();
    let sentence = match line.find(". ") {
        Some(end) => &line[..end],
        None => line.trim_end_matches('.'),
    };
    if sentence.chars().count() <= SUMMARY_CHARS {
        return sentence.to_string();
    }
    let cut: String = sentence.chars().take(SUMMARY_CHARS - 1).collect();
    let at_word = cut.rfind(' ').map_or(cut.as_str(), |i| &cut[..i]);
    format!("{}…", at_word.trim_end_matches([',', ';', ':']))
}

/// Tool names in a `tool_schema` call's arguments (`names`, or one `name`).
fn requested(args: &Value) -> Vec<String> {
    let mut names: Vec<String> = args
        .get("names")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if let Some(one) = args.get("name").and_then(Value::as_str) {
        names.push(one.to_string());
    }
    names
}

/// Most tools a `prefix*` pattern lists in one `tool_schema` answer.
pub const PATTERN_MATCHES: usize = 100;

/// `tool_schema`: the full descriptions and parameters of named tools, and
/// the names and summaries of tools matching a `prefix*` pattern (a source
/// with more tools than its prompt line names says to ask that way).
pub(super) struct SchemaTool {
    /// Every other tool's definition, by canonical name, as registered.
    pub(super) definitions: BTreeMap<String, ToolDefinition>,
    /// The sources of changing tools, asked for names not registered.
    pub(super) sources: Vec<std::sync::Arc<dyn super::ToolSource>>,
}

impl SchemaTool {
    /// The definition of the tool with canonical name `name`, registered or a source's.
    fn definition(&self, name: &str) -> Option<ToolDefinition> {
        self.definitions.get(name).cloned().or_else(|| {
            self.sources
                .iter()
                .find_map(|s| s.get(name))
                .map(|tool| tool.spec().definition())
        })
    }

    /// `{name, summary}` of every tool whose name starts with `prefix`, sorted.
    fn matching(&self, prefix: &str) -> Vec<Value> {
        let mut names: BTreeMap<String, String> = self
            .definitions
            .values()
            .filter(|d| d.name.starts_with(prefix) && d.name != SCHEMA_TOOL)
            .map(|d| (d.name.clone(), summary(&d.description)))
            .collect();
        for tool in self.sources.iter().flat_map(|s| s.tools()) {
            let spec = tool.spec();
            if spec.name().starts_with(prefix) {
                names.insert(spec.name().to_string(), summary(spec.description()));
            }
        }
        names
            .into_iter()
            .take(PATTERN_MATCHES)
            .map(|(name, summary)| json!({"name": name, "summary": summary}))
            .collect()
    }
}

static SCHEMA_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        SCHEMA_TOOL,
        RiskLevel::ReadOnly,
        "Load the parameters of tools listed without a schema (`x*` lists names); then call them.",
    )
    .params(schema::object(
        json!({"names": {"type": "array", "items": {"type": "string"}}}),
        &["names"],
    ))
});

#[async_trait]
impl Tool for SchemaTool {
    fn spec(&self) -> &ToolSpec {
        &SCHEMA_SPEC
    }
    async fn execute(&self, args: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        let names = requested(&args);
        if names.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`names` must list at least one tool name".into(),
            ));
        }
        let mut found = Vec::new();
        let mut matches = Vec::new();
        let mut unknown = Vec::new();
        for name in names {
            let key = super::registry::normalize_name(&name);
            if let Some(prefix) = key.strip_suffix('*') {
                let listed = self.matching(prefix);
                if listed.is_empty() {
                    unknown.push(name);
                }
                matches.extend(listed);
                continue;
            }
            match self.definition(&key) {
                Some(d) => found.push(json!({
                    "name": d.name,
                    "description": d.description,
                    "parameters": d.parameters,
                })),
                None => unknown.push(name),
            }
        }
        let mut out = json!({"tools": found});
        if !matches.is_empty() {
            out["matching"] = json!(matches);
            out["note"] = json!("ask tool_schema for the parameters of the ones you need");
        }
        if !unknown.is_empty() {
            out["unknown"] = json!(unknown);
        }
        serde_json::to_string(&out)
            .map(ToolOutput::ok)
            .map_err(|e| ToolError::Failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_keep_the_first_sentence_and_cut_at_a_word() {
        assert_eq!(summary("Read a file. Long files are cut."), "Read a file");
        assert_eq!(summary("Status of a task."), "Status of a task");
        let long = "Run a tool call in the background and tell the conversation when it ends, whatever happens";
        let s = summary(long);
        assert!(s.chars().count() <= SUMMARY_CHARS, "{s}");
        assert!(s.ends_with('…'), "{s}");
        assert!(long.starts_with(s.trim_end_matches('…')), "{s}");
    }

    #[test]
    fn families_are_brace_grouped_by_prefix() {
        let names: Vec<String> = ["remember", "schedule_cron", "schedule_once", "watch_start"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            grouped(&names),
            "remember, schedule_{cron,once}, watch_start"
        );
    }

    #[test]
    fn names_come_as_a_list_or_one_name() {
        assert_eq!(requested(&json!({"names": ["a", 3, "b"]})), ["a", "b"]);
        assert_eq!(requested(&json!({"name": "c"})), ["c"]);
        assert!(requested(&json!({})).is_empty());
    }
}
