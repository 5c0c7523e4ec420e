//! The tool registry: canonical names, case-insensitive aliases, definitions for the model.
//!
//! Besides the tools registered once at start-up, a registry consults
//! [`ToolSource`]s: sets of tools that come and go while cairn runs (an MCP
//! server's, which connects, restarts and changes its list).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cairn_core::chat::ToolDefinition;
use cairn_core::text::edit_distance;

use super::Tool;
pub use crate::names::{DEFAULT_ALIASES, normalize_name};

/// Why a tool or alias could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The name is empty, too long, or has characters other than `a-z`, `0-9`, `_`.
    #[error("invalid tool name `{0}`: use 1-64 characters from a-z, 0-9 and _")]
    InvalidName(String),
    /// A tool with this name is already registered.
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
    /// The alias already names a tool or points at another tool.
    #[error("alias `{alias}` conflicts with `{existing}`")]
    AliasConflict {
        /// The alias being added.
        alias: String,
        /// The tool it already refers to.
        existing: String,
    },
    /// The alias targets a tool that is not registered.
    #[error("alias `{alias}` targets unknown tool `{target}`")]
    UnknownTarget {
        /// The alias being added.
        alias: String,
        /// The missing canonical name.
        target: String,
    },
    /// A built-in tool failed to initialise.
    #[error("tool initialisation failed: {0}")]
    Init(String),
}

/// Tools that come and go while cairn runs (an MCP server's), consulted by
/// the registry after its own. Names are canonical (see [`normalize_name`])
/// and never those of registered tools, which win.
pub trait ToolSource: Send + Sync {
    /// The tools the source has now.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;

    /// The tool with canonical name `name`, if the source has it now.
    fn get(&self, name: &str) -> Option<Arc<dyn Tool>>;

    /// The prompt's lines naming the source's tools when schemas load on
    /// demand ([`super::offer`]), leaving out `hidden` ones; the source keeps
    /// them short however many tools it has.
    fn listing(&self, hidden: &dyn Fn(&str) -> bool) -> Vec<String>;
}

/// The set of tools a runner can call, keyed by canonical name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    /// Explicit aliases (from registration), normalised alias -> canonical name.
    aliases: HashMap<String, String>,
    /// Tools whose schema every request carries once the schema tool is on
    /// (see [`super::offer`]).
    core: std::collections::BTreeSet<String>,
    /// Tools that change while cairn runs, consulted after the registered ones.
    sources: Vec<Arc<dyn ToolSource>>,
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool and the aliases it declares.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.spec().name().to_string();
        if !valid_name(&name) {
            return Err(RegistryError::InvalidName(name));
        }
        if self.tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        if let Some(target) = self.aliases.get(&name) {
            return Err(RegistryError::AliasConflict {
                alias: name,
                existing: target.clone(),
            });
        }
        // Check every alias before inserting anything, so a failure leaves no trace.
        let aliases: Vec<String> = tool
            .spec()
            .aliases()
            .iter()
            .map(|a| normalize_name(a))
            .collect();
        for alias in &aliases {
            self.check_alias(alias, &name)?;
        }
        for alias in aliases {
            self.aliases.insert(alias, name.clone());
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    /// Keeps only the registered tools whose canonical name `keep` accepts
    /// (with their aliases): an agent denied a tool is never offered it.
    /// Call it before [`Self::enable_schema_tool`], which lists the schemas.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.tools.retain(|name, _| keep(name));
        let tools = &self.tools;
        self.aliases.retain(|_, target| tools.contains_key(target));
        self.core.retain(|name| tools.contains_key(name));
    }

    /// A registry of the tools (the sources' included) whose canonical name
    /// `keep` accepts: a sub-agent's narrower set. `tool_schema`, when on
    /// and kept, lists only the kept tools.
    pub fn subset(
        &self,
        keep: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> Result<ToolRegistry, RegistryError> {
        let mut out = self.clone();
        let schema = out.tools.remove(super::offer::SCHEMA_TOOL).is_some();
        out.retain(|name| keep(name));
        out.sources = self
            .sources
            .iter()
            .map(|source| {
                Arc::new(Kept {
                    source: Arc::clone(source),
                    keep: Arc::clone(&keep),
                }) as Arc<dyn ToolSource>
            })
            .collect();
        if schema && keep(super::offer::SCHEMA_TOOL) {
            out.enable_schema_tool()?;
        }
        Ok(out)
    }

    /// Adds a tool whose schema every request carries (see [`Self::offered`]).
    pub fn register_core(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.spec().name().to_string();
        self.register(tool)?;
        self.core.insert(name);
        Ok(())
    }

    /// Adds a source of tools that change while cairn runs (an MCP
    /// server's); register sources before [`Self::enable_schema_tool`].
    pub fn register_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// The registered tools (not the sources'), sorted by name.
    pub(super) fn own(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }

    /// Registers `tool_schema` over every tool registered so far and the
    /// sources (call it last): from then on requests carry only the core
    /// tools' schemas and those the conversation loaded or used
    /// ([`super::offer`]).
    pub fn enable_schema_tool(&mut self) -> Result<(), RegistryError> {
        // The registered tools only: a source's are asked for when needed,
        // as they are then.
        let definitions = self
            .own()
            .map(|tool| (tool.spec().name().to_string(), tool.spec().definition()))
            .collect();
        self.register(Arc::new(super::offer::SchemaTool {
            definitions,
            sources: self.sources.clone(),
        }))
    }

    /// The core tools' names.
    pub(super) fn core_names(&self) -> impl Iterator<Item = &str> {
        self.core.iter().map(String::as_str)
    }

    /// The tools every request carries when the schema tool is on (the core
    /// ones and `tool_schema`); empty when every schema is sent.
    pub fn always_offered(&self) -> Vec<String> {
        if !self.tools.contains_key(super::offer::SCHEMA_TOOL) {
            return Vec::new();
        }
        self.core
            .iter()
            .cloned()
            .chain([super::offer::SCHEMA_TOOL.to_string()])
            .collect()
    }

    /// The prompt's lines naming the tools whose schemas load on demand
    /// (see [`super::offer`]); empty when every schema is sent.
    /// `hidden` tools (disabled ones) are left out.
    pub fn on_demand_listing(&self, hidden: &dyn Fn(&str) -> bool) -> Vec<String> {
        if self.tools.contains_key(super::offer::SCHEMA_TOOL) {
            let mut lines = super::offer::listing(self, hidden);
            lines.extend(self.sources.iter().flat_map(|s| s.listing(hidden)));
            lines
        } else {
            Vec::new()
        }
    }

    /// The definitions a model request carries after `messages`: all of
    /// them, unless the schema tool is on ([`super::offer`]).
    pub fn offered(&self, messages: &[cairn_core::chat::ChatMessage]) -> Vec<ToolDefinition> {
        if self.tools.contains_key(super::offer::SCHEMA_TOOL) {
            super::offer::offered(self, messages)
        } else {
            self.definitions()
        }
    }

    /// Adds an alias for a registered tool.
    pub fn register_alias(&mut self, alias: &str, target: &str) -> Result<(), RegistryError> {
        let alias = normalize_name(alias);
        let target = normalize_name(target);
        if !self.tools.contains_key(&target) {
            return Err(RegistryError::UnknownTarget { alias, target });
        }
        self.check_alias(&alias, &target)?;
        self.aliases.insert(alias, target);
        Ok(())
    }

    fn check_alias(&self, alias: &str, target: &str) -> Result<(), RegistryError> {
        if self.tools.contains_key(alias) {
            return Err(RegistryError::AliasConflict {
                alias: alias.to_string(),
                existing: alias.to_string(),
            });
        }
        match self.aliases.get(alias) {
            Some(existing) if existing != target => Err(RegistryError::AliasConflict {
                alias: alias.to_string(),
                existing: existing.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// The canonical name `name` refers to (exact, alias, or default alias)
    /// among the registered tools, if any; a source's tools are found by
    /// [`Self::get`].
    pub fn resolve(&self, name: &str) -> Option<&str> {
        let key = normalize_name(name);
        if let Some((canonical, _)) = self.tools.get_key_value(&key) {
            return Some(canonical);
        }
        let target = self.aliases.get(&key).map(String::as_str).or_else(|| {
            DEFAULT_ALIASES
                .iter()
                .find(|(alias, _)| *alias == key)
                .map(|(_, target)| *target)
        })?;
        self.tools.get_key_value(target).map(|(k, _)| k.as_str())
    }

    /// The tool `name` refers to, by canonical name or alias, case-insensitively,
    /// a registered tool first, then one of a source's.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some(canonical) = self.resolve(name) {
            return self.tools.get(canonical).cloned();
        }
        let key = normalize_name(name);
        self.sources.iter().find_map(|source| source.get(&key))
    }

    /// Every tool, the sources' included, sorted by name.
    pub fn list(&self) -> Vec<Arc<dyn Tool>> {
        let mut tools: Vec<Arc<dyn Tool>> = self.tools.values().cloned().collect();
        if !self.sources.is_empty() {
            tools.extend(self.sources.iter().flat_map(|s| s.tools()));
            tools.sort_by(|a, b| a.spec().name().cmp(b.spec().name()));
        }
        tools
    }

    /// Every registered tool's canonical name, sorted (not the sources').
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// Number of registered tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools as offered to the model, the sources' included, sorted by
    /// name (stable prompts cache better).
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.list()
            .into_iter()
            .map(|tool| tool.spec().definition())
            .collect()
    }

    /// Canonical names close to `name` (typos, substrings), best first, at most five.
    pub fn similar(&self, name: &str) -> Vec<String> {
        let key = normalize_name(name);
        let mut scored: Vec<(usize, &str)> = self
            .tools
            .keys()
            .filter_map(|candidate| {
                let distance = edit_distance(&key, candidate);
                let close = distance <= 2.max(key.len() / 3);
                let contains = key.len() >= 3
                    && (candidate.contains(&key) || key.contains(candidate.as_str()));
                (close || contains).then_some((distance, candidate.as_str()))
            })
            .collect();
        scored.sort();
        scored
            .into_iter()
            .take(5)
            .map(|(_, n)| n.to_string())
            .collect()
    }
}

/// A source seen through a [`ToolRegistry::subset`]: only the tools kept.
struct Kept {
    source: Arc<dyn ToolSource>,
    keep: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

impl ToolSource for Kept {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut tools = self.source.tools();
        tools.retain(|tool| (self.keep)(tool.spec().name()));
        tools
    }

    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.source.get(name).filter(|_| (self.keep)(name))
    }

    fn listing(&self, hidden: &dyn Fn(&str) -> bool) -> Vec<String> {
        self.source
            .listing(&|name| hidden(name) || !(self.keep)(name))
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .field("aliases", &self.aliases)
            .field("sources", &self.sources.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Authorized;
    use crate::tools::{CallOutcome, RiskLevel, ToolContext, ToolOutput, ToolSpec};
    use async_trait::async_trait;
    use serde_json::Value;

    struct Named(ToolSpec);

    fn named(name: &'static str, aliases: &'static [&'static str]) -> Named {
        Named(ToolSpec::new(name, RiskLevel::ReadOnly, "test tool").aliased(aliases))
    }

    #[async_trait]
    impl Tool for Named {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        async fn execute(&self, _: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
            Ok(ToolOutput::ok(self.0.name()))
        }
    }

    #[test]
    fn rejects_bad_names_and_duplicates() {
        let mut r = ToolRegistry::new();
        assert!(matches!(
            r.register(Arc::new(named("Bad-Name", &[]))),
            Err(RegistryError::InvalidName(_))
        ));
        assert!(matches!(
            r.register(Arc::new(named("", &[]))),
            Err(RegistryError::InvalidName(_))
        ));
        r.register(Arc::new(named("alpha", &[]))).unwrap();
        assert_eq!(
            r.register(Arc::new(named("alpha", &[]))),
            Err(RegistryError::Duplicate("alpha".into()))
        );
    }

    #[test]
    fn alias_conflicts_leave_registry_unchanged() {
        let mut r = ToolRegistry::new();
        r.register(Arc::new(named("alpha", &["a"]))).unwrap();
        let err = r
            .register(Arc::new(named("beta", &["b", "a"])))
            .unwrap_err();
        assert!(matches!(err, RegistryError::AliasConflict { .. }));
        assert!(r.get("beta").is_none());
        assert!(r.get("b").is_none());
        assert!(matches!(
            r.register_alias("x", "nope"),
            Err(RegistryError::UnknownTarget { .. })
        ));
        assert!(matches!(
            r.register_alias("alpha", "alpha"),
            Err(RegistryError::AliasConflict { .. })
        ));
    }

    #[test]
    fn default_alias_needs_registered_target() {
        let mut r = ToolRegistry::new();
        assert!(r.resolve("bash").is_none());
        r.register(Arc::new(named("shell", &[]))).unwrap();
        assert_eq!(r.resolve("BASH"), Some("shell"));
        assert_eq!(r.resolve(" Shell "), Some("shell"));
    }

    #[test]
    fn similar_suggests_close_names() {
        let mut r = ToolRegistry::new();
        for name in ["file_read", "file_write", "shell", "time_now"] {
            r.register(Arc::new(named(name, &[]))).unwrap();
        }
        assert_eq!(r.similar("file_raed")[0], "file_read");
        assert!(r.similar("file").contains(&"file_write".to_string()));
        assert!(r.similar("zzzzzzzzzz").is_empty());
    }

    /// Tools that change while the registry is in use.
    struct Changing(std::sync::Mutex<Vec<&'static str>>);

    impl ToolSource for Changing {
        fn tools(&self) -> Vec<Arc<dyn Tool>> {
            let names = self.0.lock().unwrap().clone();
            names
                .into_iter()
                .map(|n| Arc::new(named(n, &[])) as Arc<dyn Tool>)
                .collect()
        }
        fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
            self.tools().into_iter().find(|t| t.spec().name() == name)
        }
        fn listing(&self, hidden: &dyn Fn(&str) -> bool) -> Vec<String> {
            let names = self.0.lock().unwrap().clone();
            let shown: Vec<&str> = names.into_iter().filter(|n| !hidden(n)).collect();
            vec![format!("- changing: {}", shown.join(","))]
        }
    }

    #[tokio::test]
    async fn sources_are_consulted_after_registered_tools_as_they_change() {
        use cairn_core::chat::{ChatMessage, ToolCall};
        let source = Arc::new(Changing(std::sync::Mutex::new(vec!["mcp__s__a"])));
        let mut r = ToolRegistry::new();
        r.register_core(Arc::new(named("alpha", &[]))).unwrap();
        r.register_source(source.clone());
        r.enable_schema_tool().unwrap();
        assert_eq!(r.get("MCP__S__A").unwrap().spec().name(), "mcp__s__a");
        assert!(r.get("mcp__s__b").is_none());
        source.0.lock().unwrap().push("mcp__s__b");
        assert_eq!(r.get("mcp__s__b").unwrap().spec().name(), "mcp__s__b");
        let listed: Vec<String> = r
            .list()
            .iter()
            .map(|t| t.spec().name().to_string())
            .collect();
        assert_eq!(listed, ["alpha", "mcp__s__a", "mcp__s__b", "tool_schema"]);
        assert_eq!(
            r.names(),
            ["alpha", "tool_schema"],
            "names are the registered ones"
        );
        assert_eq!(
            r.on_demand_listing(&|n| n == "mcp__s__a"),
            ["- changing: mcp__s__b"]
        );
        // Not offered until called or loaded; then offered from then on.
        let offered = |messages: &[ChatMessage]| -> Vec<String> {
            r.offered(messages).into_iter().map(|d| d.name).collect()
        };
        assert_eq!(offered(&[]), ["alpha", "tool_schema"]);
        let mut called = ChatMessage::assistant("");
        called.tool_calls.push(ToolCall {
            id: "1".into(),
            name: "mcp__s__b".into(),
            arguments: serde_json::json!({}),
        });
        assert_eq!(offered(&[called]), ["alpha", "mcp__s__b", "tool_schema"]);
        // tool_schema finds a source's tool, and lists names for a pattern.
        let schema = r.get("tool_schema").unwrap();
        let ctx = ToolContext::new(".", "s");
        let out = schema
            .execute(
                serde_json::json!({"names": ["mcp__s__a", "mcp__s__*", "nope*"]}),
                &ctx,
                &Authorized::for_tests(),
            )
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(v["tools"][0]["name"], "mcp__s__a");
        assert_eq!(v["matching"].as_array().unwrap().len(), 2, "{v}");
        assert_eq!(v["matching"][1]["name"], "mcp__s__b");
        assert_eq!(v["unknown"], serde_json::json!(["nope*"]));
        // A source's tool that is gone is gone for tool_schema too (its
        // list at enable time is not kept).
        source.0.lock().unwrap().retain(|n| *n != "mcp__s__a");
        let out = schema
            .execute(
                serde_json::json!({"names": ["mcp__s__a", "mcp__s__*"]}),
                &ctx,
                &Authorized::for_tests(),
            )
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(v["unknown"], serde_json::json!(["mcp__s__a"]), "{v}");
        assert_eq!(v["matching"].as_array().unwrap().len(), 1, "{v}");
    }

    #[tokio::test]
    async fn a_subset_keeps_only_what_it_is_told_sources_included() {
        let source = Arc::new(Changing(std::sync::Mutex::new(vec![
            "mcp__s__a",
            "mcp__s__b",
        ])));
        let mut r = ToolRegistry::new();
        r.register_core(Arc::new(named("alpha", &["al"]))).unwrap();
        r.register_core(Arc::new(named("beta", &[]))).unwrap();
        r.register_source(source.clone());
        r.enable_schema_tool().unwrap();
        let keep: Arc<dyn Fn(&str) -> bool + Send + Sync> =
            Arc::new(|n: &str| ["alpha", "mcp__s__b", "tool_schema"].contains(&n));
        let sub = r.subset(keep).unwrap();
        let listed: Vec<String> = sub
            .list()
            .iter()
            .map(|t| t.spec().name().to_string())
            .collect();
        assert_eq!(listed, ["alpha", "mcp__s__b", "tool_schema"]);
        assert!(sub.get("beta").is_none() && sub.get("mcp__s__a").is_none());
        assert_eq!(sub.get("AL").unwrap().spec().name(), "alpha");
        assert_eq!(sub.on_demand_listing(&|_| false), ["- changing: mcp__s__b"]);
        // tool_schema knows only the kept tools.
        let out = sub
            .get("tool_schema")
            .unwrap()
            .execute(
                serde_json::json!({"names": ["beta", "alpha"]}),
                &ToolContext::new(".", "s"),
                &Authorized::for_tests(),
            )
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(v["unknown"], serde_json::json!(["beta"]), "{v}");
        // Without tool_schema every kept schema is sent.
        let bare = r.subset(Arc::new(|n: &str| n == "beta")).unwrap();
        let offered: Vec<String> = bare.offered(&[]).into_iter().map(|d| d.name).collect();
        assert_eq!(offered, ["beta"]);
        assert_eq!(r.list().len(), 5, "the registry itself is unchanged");
    }
}
