//! Several agents in one daemon (`[[agents]]`): each with its own
//! workspace (identity files, skills, notes), model, tool policy and
//! budget share, and the chats bound to it. `main` always exists and takes
//! every chat no binding names; its settings are the top-level ones unless
//! an `[[agents]]` entry with `id = "main"` changes them.
//!
//! This module reads and checks the table and routes a chat to its agent;
//! the binary builds each agent's running parts from it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_core::config::Section;
use cairn_core::live::Live;
use serde::Deserialize;
use serde_json::Value;

use crate::chat::ChatService;
use crate::policy::AutonomyLevel;

/// The agent every unbound chat goes to.
pub const MAIN: &str = "main";

/// The longest agent id.
const MAX_ID: usize = 32;

/// One `[[agents]]` entry, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    /// Its id (`main`, `family`): letters, digits, `-`, `_`.
    pub id: String,
    /// The name it goes by in its prompt; the top-level `agent.name` when unset.
    pub name: Option<String>,
    /// Its workspace, absolute; `None` for `main` (the top-level workspace).
    pub workspace: Option<PathBuf>,
    /// The model it asks, on the main provider; `None`: the main model.
    pub model: Option<String>,
    /// How much it may do without asking; never more than the global level.
    pub autonomy: Option<AutonomyLevel>,
    /// Tool-name patterns that run without asking (within the global policy).
    pub allow: Vec<String>,
    /// Tool-name patterns it never has (besides the global ones).
    pub deny: Vec<String>,
    /// Its share of the global daily budget, in cents.
    pub daily_budget_cents: Option<u64>,
    /// The chats bound to it.
    pub bindings: Vec<Binding>,
}

/// Chats bound to an agent: every chat of `channel`, or one chat of it, or
/// one person on it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// The channel's name (`[channels.NAME]`).
    pub channel: String,
    /// One chat of it (a Slack or Discord channel id, a Telegram chat id,
    /// a WhatsApp number).
    #[serde(default)]
    pub chat: Option<String>,
    /// One person on it (their user id on the app).
    #[serde(default)]
    pub user: Option<String>,
}

impl Binding {
    /// How specific it is: a person (2) before a chat (1) before a channel (0).
    fn rank(&self) -> u8 {
        match (&self.user, &self.chat) {
            (Some(_), _) => 2,
            (None, Some(_)) => 1,
            (None, None) => 0,
        }
    }

    fn matches(&self, channel: &str, chat: &str, user: &str) -> bool {
        self.channel == channel
            && self.chat.as_deref().is_none_or(|c| c == chat)
            && self.user.as_deref().is_none_or(|u| u == user)
    }

    fn describe(&self) -> String {
        let mut out = format!("channel = \"{}\"", self.channel);
        if let Some(chat) = &self.chat {
            out.push_str(&format!(", chat = \"{chat}\""));
        }
        if let Some(user) = &self.user {
            out.push_str(&format!(", user = \"{user}\""));
        }
        out
    }
}

/// The agents, `main` first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agents {
    list: Vec<AgentSpec>,
}

impl Default for Agents {
    fn default() -> Self {
        Self {
            list: vec![main_default()],
        }
    }
}

fn main_default() -> AgentSpec {
    AgentSpec {
        id: MAIN.to_string(),
        name: None,
        workspace: None,
        model: None,
        autonomy: None,
        allow: Vec::new(),
        deny: Vec::new(),
        daily_budget_cents: None,
        bindings: Vec::new(),
    }
}

/// One `[[agents]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    autonomy: Option<AutonomyLevel>,
    #[serde(default)]
    tools: Option<Rules>,
    /// Read as written, so a bad value is named by its field.
    #[serde(default)]
    daily_budget_cents: Option<Value>,
    #[serde(default)]
    bindings: Vec<Binding>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Rules {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

/// What the agents are checked against.
pub struct Limits<'a> {
    /// `$CAIRN_HOME`: relative workspaces are below it.
    pub home: &'a Path,
    /// `main`'s workspace: no other agent's may be inside it, nor hold it.
    pub main_workspace: &'a Path,
    /// The global autonomy level, which no agent may exceed.
    pub autonomy: AutonomyLevel,
    /// The global daily budget in cents (`cost.daily_budget_cents`), which
    /// no agent's share may exceed.
    pub daily_budget_cents: Option<u64>,
}

impl Agents {
    /// Reads the `[[agents]]` array. Every problem is reported, each as
    /// `agents[i].field: why`.
    pub fn parse(section: Option<&Section>, limits: &Limits<'_>) -> Result<Agents, Vec<String>> {
        let mut agents = Agents::default();
        let Some(section) = section else {
            return Ok(agents);
        };
        let Value::Array(items) = &section.value else {
            return Err(vec![
                "agents: write each agent as an `[[agents]]` table".to_string(),
            ]);
        };
        let mut errors = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match serde_json::from_value::<Entry>(item.clone()) {
                Ok(entry) => match spec(entry, i, limits) {
                    Ok(spec) if spec.id == MAIN => agents.list[0] = spec,
                    Ok(spec) if agents.get(&spec.id).is_some() => {
                        errors.push(format!("agents[{i}].id: \"{}\" is used twice", spec.id));
                    }
                    Ok(spec) => agents.list.push(spec),
                    Err(e) => errors.extend(e),
                },
                Err(e) => errors.push(format!("agents[{i}]: {e}")),
            }
        }
        errors.extend(agents.overlaps(limits));
        errors.extend(agents.twice_bound());
        if errors.is_empty() {
            Ok(agents)
        } else {
            Err(errors)
        }
    }

    /// Every agent, `main` first.
    pub fn all(&self) -> &[AgentSpec] {
        &self.list
    }

    /// The agent `id`.
    pub fn get(&self, id: &str) -> Option<&AgentSpec> {
        self.list.iter().find(|a| a.id == id)
    }

    /// The agent a message in `chat` of the channel `channel` from `user`
    /// goes to: the most specific binding (a person, then a chat, then the
    /// channel), else `main`.
    pub fn route(&self, channel: &str, chat: &str, user: &str) -> &str {
        self.list
            .iter()
            .flat_map(|a| a.bindings.iter().map(move |b| (a, b)))
            .filter(|(_, b)| b.matches(channel, chat, user))
            .max_by_key(|(_, b)| b.rank())
            .map_or(MAIN, |(a, _)| a.id.as_str())
    }

    /// Every agent's id and share of the daily budget in cents, `main`
    /// first: the cost guard's lines ([`crate::CostGuard::set_agents`]).
    pub fn shares(&self) -> Vec<(String, Option<u64>)> {
        self.list
            .iter()
            .map(|a| (a.id.clone(), a.daily_budget_cents))
            .collect()
    }

    /// The channels the bindings name (for `doctor` to check they exist).
    pub fn bound_channels(&self) -> BTreeSet<&str> {
        self.list
            .iter()
            .flat_map(|a| a.bindings.iter().map(|b| b.channel.as_str()))
            .collect()
    }

    /// Workspaces inside one another would let one agent's file tools read
    /// the other's.
    fn overlaps(&self, limits: &Limits<'_>) -> Vec<String> {
        let place = |a: &AgentSpec| {
            a.workspace
                .clone()
                .unwrap_or_else(|| limits.main_workspace.to_path_buf())
        };
        let mut errors = Vec::new();
        for (i, a) in self.list.iter().enumerate() {
            for b in &self.list[i + 1..] {
                let (pa, pb) = (place(a), place(b));
                if pa.starts_with(&pb) || pb.starts_with(&pa) {
                    errors.push(format!(
                        "agents: the workspaces of {} ({}) and {} ({}) are one inside the other; each agent needs its own",
                        a.id,
                        pa.display(),
                        b.id,
                        pb.display()
                    ));
                }
            }
        }
        errors
    }

    fn twice_bound(&self) -> Vec<String> {
        let mut seen: Vec<(&Binding, &str)> = Vec::new();
        let mut errors = Vec::new();
        for a in &self.list {
            for b in &a.bindings {
                if let Some((_, first)) = seen.iter().find(|(s, _)| *s == b) {
                    errors.push(format!(
                        "agents: the binding {{ {} }} is given twice ({first} and {})",
                        b.describe(),
                        a.id
                    ));
                } else {
                    seen.push((b, &a.id));
                }
            }
        }
        errors
    }
}

/// Each agent's chat service, and which one a chat goes to. The agents
/// other than `main` are replaced as a whole when `[[agents]]` is reloaded
/// ([`Chats::replace`]); a turn keeps the service it was given.
#[derive(Debug)]
pub struct Chats {
    main: Arc<ChatService>,
    set: Live<ChatSet>,
}

/// The agents and the services of those other than `main`: one value, so
/// a chat is never routed to an agent whose service is not there yet.
#[derive(Debug, Default)]
pub struct ChatSet {
    agents: Agents,
    others: BTreeMap<String, Arc<ChatService>>,
}

impl ChatSet {
    /// The agents and the services of those other than `main`, by id;
    /// `Err` naming an agent without one.
    pub fn new(agents: Agents, others: BTreeMap<String, Arc<ChatService>>) -> Result<Self, String> {
        let missing = agents
            .all()
            .iter()
            .find(|a| a.id != MAIN && !others.contains_key(&a.id));
        if let Some(a) = missing {
            return Err(format!("agent {} has no chat service", a.id));
        }
        Ok(Self { agents, others })
    }

    /// Services by id with no bindings (a front end that is told the
    /// agent, such as `/v1`, never routes).
    pub fn unrouted(others: BTreeMap<String, Arc<ChatService>>) -> Self {
        Self {
            agents: Agents::default(),
            others,
        }
    }

    /// The agents.
    pub fn agents(&self) -> &Agents {
        &self.agents
    }

    /// The other agents' services, by id.
    pub fn others(&self) -> &BTreeMap<String, Arc<ChatService>> {
        &self.others
    }
}

impl Chats {
    /// `main` alone (no `[[agents]]`).
    pub fn single(main: Arc<ChatService>) -> Self {
        Self {
            main,
            set: Live::new(Arc::new(ChatSet::default())),
        }
    }

    /// `main`'s service and the others' ([`ChatSet::new`]).
    pub fn new(main: Arc<ChatService>, set: ChatSet) -> Self {
        Self {
            main,
            set: Live::new(Arc::new(set)),
        }
    }

    /// The agents other than `main` and their services in force now.
    pub fn set(&self) -> Arc<ChatSet> {
        self.set.get()
    }

    /// The slot [`Chats::set`] reads, for a front end that looks agents
    /// up by id and must follow a reload (the gateway).
    pub fn live(&self) -> Live<ChatSet> {
        self.set.clone()
    }

    /// Puts a new set of agents in force for every later message.
    pub fn replace(&self, set: ChatSet) {
        self.set.set(Arc::new(set));
    }

    /// `main`'s service.
    pub fn main(&self) -> &Arc<ChatService> {
        &self.main
    }

    /// The agent `id`'s service.
    pub fn get(&self, id: &str) -> Option<Arc<ChatService>> {
        if id == MAIN {
            Some(Arc::clone(&self.main))
        } else {
            self.set.get().others.get(id).cloned()
        }
    }

    /// The service a message in `chat` of the channel `channel` from
    /// `user` goes to ([`Agents::route`]).
    pub fn pick(&self, channel: &str, chat: &str, user: &str) -> Arc<ChatService> {
        let set = self.set.get();
        let id = set.agents.route(channel, chat, user);
        match set.others.get(id) {
            Some(service) if id != MAIN => Arc::clone(service),
            _ => Arc::clone(&self.main),
        }
    }
}

/// An entry checked field by field.
fn spec(entry: Entry, i: usize, limits: &Limits<'_>) -> Result<AgentSpec, Vec<String>> {
    let mut errors = Vec::new();
    let id = entry.id.trim().to_string();
    let id_ok = !id.is_empty()
        && id.len() <= MAX_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !id_ok {
        errors.push(format!(
            "agents[{i}].id: \"{id}\" must be 1 to {MAX_ID} letters, digits, - or _"
        ));
    }
    let main = id == MAIN;
    let main_extra = entry.model.is_some()
        || entry.autonomy.is_some()
        || entry.tools.is_some()
        || entry.daily_budget_cents.is_some();
    if main && main_extra {
        errors.push(format!(
            "agents[{i}]: main takes its model from [llm], its tools from [tools.policy] and its budget from [cost]; set them there (an `[[agents]]` entry for main may set its name)"
        ));
    }
    let workspace = match (&entry.workspace, main) {
        (Some(_), true) => {
            errors.push(format!(
                "agents[{i}].workspace: main's workspace is the top-level `workspace` setting"
            ));
            None
        }
        (Some(w), false) if w.trim().is_empty() => {
            errors.push(format!("agents[{i}].workspace: empty"));
            None
        }
        (Some(w), false) => Some(limits.home.join(w)),
        (None, false) => Some(limits.home.join("agents").join(&id)),
        (None, true) => None,
    };
    if let Some(level) = entry.autonomy
        && level > limits.autonomy
    {
        errors.push(format!(
            "agents[{i}].autonomy: {level:?} is more than tools.policy.autonomy ({:?}); an agent never gets more than the global policy",
            limits.autonomy
        ));
    }
    let daily_budget_cents = match &entry.daily_budget_cents {
        Some(value) if !main => match share(value, limits.daily_budget_cents) {
            Ok(cents) => Some(cents),
            Err(why) => {
                errors.push(format!("agents[{i}].daily_budget_cents: {why}"));
                None
            }
        },
        _ => None,
    };
    if entry.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        errors.push(format!("agents[{i}].model: empty"));
    }
    for (j, b) in entry.bindings.iter().enumerate() {
        if main {
            errors.push(format!(
                "agents[{i}].bindings[{j}]: main takes every chat no other agent is bound to; bind chats to the other agents"
            ));
            break;
        }
        if b.channel.trim().is_empty() {
            errors.push(format!("agents[{i}].bindings[{j}].channel: empty"));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let rules = entry.tools.unwrap_or_default();
    Ok(AgentSpec {
        id,
        name: entry.name.filter(|n| !n.trim().is_empty()),
        workspace,
        model: entry.model,
        autonomy: entry.autonomy,
        allow: rules.allow,
        deny: rules.deny,
        daily_budget_cents,
        bindings: entry.bindings,
    })
}

/// An agent's share of the daily budget: a whole number of cents above 0,
/// no more than the global budget when one is set.
fn share(value: &Value, global: Option<u64>) -> Result<u64, String> {
    let cents = value
        .as_u64()
        .filter(|c| *c > 0)
        .ok_or_else(|| format!("{value} is not a whole number of cents above 0"))?;
    match global {
        Some(budget) if cents > budget => Err(format!(
            "{cents} is more than cost.daily_budget_cents ({budget}); an agent's share is part of the global budget"
        )),
        _ => Ok(cents),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: Value) -> Result<Agents, Vec<String>> {
        let section = Section { value, line: 3 };
        Agents::parse(
            Some(&section),
            &Limits {
                home: Path::new("/h"),
                main_workspace: Path::new("/h/workspace"),
                autonomy: AutonomyLevel::Supervised,
                daily_budget_cents: Some(100),
            },
        )
    }

    #[test]
    fn the_issues_example_reads_and_routes_by_the_most_specific_binding() {
        let agents = parse(json!([
            {"id": "main", "name": "Cairn"},
            {"id": "family", "name": "Pip", "workspace": "agents/family", "model": "cheap-model",
             "autonomy": "supervised", "daily_budget_cents": 50,
             "tools": {"allow": ["memory_*", "web_*", "send_notification"], "deny": ["shell"]},
             "bindings": [{"channel": "wa"}, {"channel": "team", "chat": "C0123"}]},
            {"id": "coder", "bindings": [{"channel": "team", "user": "U1"}]},
        ]))
        .unwrap();
        let family = agents.get("family").unwrap();
        assert_eq!(
            family.workspace.as_deref(),
            Some(Path::new("/h/agents/family"))
        );
        assert_eq!(family.deny, ["shell"]);
        assert_eq!(family.model.as_deref(), Some("cheap-model"));
        assert_eq!(family.daily_budget_cents, Some(50));
        assert_eq!(agents.get("coder").unwrap().daily_budget_cents, None);
        assert_eq!(
            agents.get("coder").unwrap().workspace.as_deref(),
            Some(Path::new("/h/agents/coder"))
        );
        assert_eq!(agents.route("wa", "15551234567", "15551234567"), "family");
        assert_eq!(agents.route("team", "C0123", "U2"), "family");
        // A person's binding beats their chat's.
        assert_eq!(agents.route("team", "C0123", "U1"), "coder");
        assert_eq!(agents.route("team", "C0999", "U2"), "main");
        assert_eq!(agents.route("tg", "42", "42"), "main");
        let ids: Vec<&str> = agents.all().iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["main", "family", "coder"]);
    }

    #[test]
    fn without_the_table_there_is_main_alone() {
        let agents = Agents::parse(
            None,
            &Limits {
                home: Path::new("/h"),
                main_workspace: Path::new("/h/workspace"),
                autonomy: AutonomyLevel::Full,
                daily_budget_cents: None,
            },
        )
        .unwrap();
        assert_eq!(agents.all().len(), 1);
        assert_eq!(agents.route("any", "chat", "user"), MAIN);
    }

    #[test]
    fn every_problem_is_named_by_its_entry_and_field() {
        let errors = parse(json!([
            {"id": "family", "bindings": [{"channel": "wa"}]},
            {"id": "family"},
            {"id": "bad id!"},
            {"id": "boss", "autonomy": "full"},
            {"id": "main", "workspace": "elsewhere", "model": "m", "bindings": [{"channel": "tg"}]},
            {"id": "inside", "workspace": "workspace/sub"},
            {"id": "again", "bindings": [{"channel": "wa"}]},
            {"id": "odd", "colour": "blue"},
            {"id": "greedy", "daily_budget_cents": 150},
            {"id": "nothing", "daily_budget_cents": 0},
            {"id": "fraction", "daily_budget_cents": 2.5},
            {"id": "main", "daily_budget_cents": 50},
        ]))
        .unwrap_err();
        let all = errors.join("\n");
        for expected in [
            "agents[1].id: \"family\" is used twice",
            "agents[2].id: \"bad id!\" must be 1 to 32 letters",
            "agents[3].autonomy: Full is more than tools.policy.autonomy (Supervised)",
            "agents[4].workspace: main's workspace is the top-level `workspace` setting",
            "agents[4].bindings[0]: main takes every chat",
            "agents[4]: main takes its model from [llm]",
            "the workspaces of main (/h/workspace) and inside (/h/workspace/sub) are one inside the other",
            "the binding { channel = \"wa\" } is given twice (family and again)",
            "agents[7]: unknown field `colour`",
            "agents[8].daily_budget_cents: 150 is more than cost.daily_budget_cents (100)",
            "agents[9].daily_budget_cents: 0 is not a whole number of cents above 0",
            "agents[10].daily_budget_cents: 2.5 is not a whole number of cents above 0",
            "agents[11]: main takes its model from [llm], its tools from [tools.policy] and its budget from [cost]",
        ] {
            assert!(all.contains(expected), "missing {expected:?} in:\n{all}");
        }
    }
}
