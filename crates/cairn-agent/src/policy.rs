//! The policy gate: for each tool call, allow, ask the user, or deny.
//!
//! Inputs are the configured rules (glob patterns on canonical tool names), the
//! autonomy level, the tool's risk, and the session's allow-list (filled by
//! "always" answers). The order of precedence, first match wins:
//!
//! 1. a `deny` rule                                  -> Deny
//! 2. autonomy `readonly` and a non-read-only tool   -> Deny
//! 3. an `ask` rule                                  -> Ask (even if allowed for the session)
//! 4. an `allow` rule, or the session allow-list     -> Allow
//! 5. autonomy `full`, or a read-only tool           -> Allow
//! 6. otherwise (`supervised`, write/dangerous tool) -> Ask
//!
//! Rules whose pattern is an exact name beat glob rules; among rules of the same
//! kind the strictest wins, so `ask = ["file_*"]` with `allow = ["file_read"]`
//! asks for every file tool except `file_read`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// How much harm a tool can do; the policy gate decides per level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    /// Only observes (reads workspace files, tells the time).
    ReadOnly,
    /// Changes local state (writes files).
    Write,
    /// Runs programs or talks to the network.
    Dangerous,
}

impl RiskLevel {
    /// Lower-case name, as used in messages and config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "readonly",
            Self::Write => "write",
            Self::Dangerous => "dangerous",
        }
    }
}

/// How much the agent may do without asking.
/// Ordered from least to most: an agent's level may not exceed the global one.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum AutonomyLevel {
    /// Only read-only tools run; everything else is denied.
    #[serde(alias = "read_only", alias = "read-only")]
    ReadOnly,
    /// Write and dangerous tools ask unless allowed.
    #[default]
    Supervised,
    /// Everything runs unless denied.
    Full,
}

/// What a rule does to the tools it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    /// Run without asking.
    Allow,
    /// Ask every time.
    Ask,
    /// Never run.
    Deny,
}

/// The gate's answer for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyDecision {
    /// Run it.
    Allow,
    /// Ask the user first.
    Ask,
    /// Refuse it.
    Deny {
        /// Why, in words the model and the user can read.
        reason: String,
    },
}

/// Tool policy as written in config: autonomy plus pattern lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolPolicyConfig {
    /// The autonomy level.
    pub autonomy: AutonomyLevel,
    /// Tool-name patterns that run without asking (`*` and `?` wildcards).
    pub allow: Vec<String>,
    /// Tool-name patterns that always ask.
    pub ask: Vec<String>,
    /// Tool-name patterns that never run.
    pub deny: Vec<String>,
}

/// One compiled rule.
#[derive(Debug, Clone)]
struct Rule {
    pattern: String,
    exact: bool,
    action: RuleAction,
}

/// The policy gate: decides every call and keeps per-session allow-lists.
#[derive(Debug)]
pub struct PolicyGate {
    autonomy: AutonomyLevel,
    rules: Vec<Rule>,
    /// Shared with the gates a reload makes from this one ([`PolicyGate::reconfigured`]).
    sessions: Arc<Mutex<HashMap<String, HashSet<String>>>>,
}

impl PolicyGate {
    /// A gate for this configuration. Patterns are matched case-insensitively.
    pub fn new(config: &ToolPolicyConfig) -> Self {
        let mut rules = Vec::new();
        for (patterns, action) in [
            (&config.allow, RuleAction::Allow),
            (&config.ask, RuleAction::Ask),
            (&config.deny, RuleAction::Deny),
        ] {
            for pattern in patterns {
                let pattern = crate::names::normalize_name(pattern);
                if pattern.is_empty() {
                    continue;
                }
                let exact = !pattern.contains(['*', '?']);
                rules.push(Rule {
                    pattern,
                    exact,
                    action,
                });
            }
        }
        Self {
            autonomy: config.autonomy,
            rules,
            sessions: Arc::default(),
        }
    }

    /// A gate for a new configuration (a reload) that keeps this one's
    /// per-session allow-lists: an "always" answer outlives the reload,
    /// though a `deny` or `ask` rule still comes first.
    pub fn reconfigured(&self, config: &ToolPolicyConfig) -> Self {
        Self {
            sessions: Arc::clone(&self.sessions),
            ..Self::new(config)
        }
    }

    /// The autonomy level.
    pub fn autonomy(&self) -> AutonomyLevel {
        self.autonomy
    }

    /// The rule that governs `tool`: exact-name rules beat globs, then the strictest.
    fn rule_for(&self, tool: &str) -> Option<&Rule> {
        let matching = || self.rules.iter().filter(|r| glob_match(&r.pattern, tool));
        let exact = matching().filter(|r| r.exact).max_by_key(|r| r.action);
        exact.or_else(|| matching().max_by_key(|r| r.action))
    }

    /// Decides a call of canonical tool `tool` with `risk` in `session`.
    pub fn decide(&self, tool: &str, risk: RiskLevel, session: &str) -> PolicyDecision {
        let rule = self.rule_for(tool);
        if let Some(rule) = rule.filter(|r| r.action == RuleAction::Deny) {
            return PolicyDecision::Deny {
                reason: format!("tool `{tool}` is denied by the rule `{}`", rule.pattern),
            };
        }
        if self.autonomy == AutonomyLevel::ReadOnly && risk != RiskLevel::ReadOnly {
            return PolicyDecision::Deny {
                reason: format!(
                    "autonomy is read-only and `{tool}` is a {} tool",
                    risk.as_str()
                ),
            };
        }
        match rule.map(|r| r.action) {
            Some(RuleAction::Ask) => return PolicyDecision::Ask,
            Some(RuleAction::Allow) => return PolicyDecision::Allow,
            _ => {}
        }
        if self.session_allows(session, tool)
            || self.autonomy == AutonomyLevel::Full
            || risk == RiskLevel::ReadOnly
        {
            PolicyDecision::Allow
        } else {
            PolicyDecision::Ask
        }
    }

    /// Records an "always" answer: `tool` runs without asking for the rest of `session`.
    pub fn allow_for_session(&self, session: &str, tool: &str) {
        self.lock()
            .entry(session.to_string())
            .or_default()
            .insert(tool.to_string());
    }

    /// True when `tool` is on `session`'s allow-list.
    pub fn session_allows(&self, session: &str, tool: &str) -> bool {
        self.lock()
            .get(session)
            .is_some_and(|tools| tools.contains(tool))
    }

    /// The tools on `session`'s allow-list, sorted (to persist it).
    pub fn session_allow_list(&self, session: &str) -> Vec<String> {
        let mut tools: Vec<String> = self
            .lock()
            .get(session)
            .map(|tools| tools.iter().cloned().collect())
            .unwrap_or_default();
        tools.sort();
        tools
    }

    /// Drops a session's allow-list (when the session ends).
    pub fn forget_session(&self, session: &str) {
        self.lock().remove(session);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        // The map stays consistent even if a holder panicked; keep using it.
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Matches `*` (any run of characters) and `?` (one character); iterative, so no
/// pattern can blow the stack or take exponential time.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matching() {
        assert!(glob_match("file_*", "file_read"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("*_dir", "list_dir"));
        assert!(glob_match("f?le_read", "file_read"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("file_*", "shell"));
        assert!(!glob_match("file_read", "file_reader"));
        assert!(glob_match("**", ""));
        assert!(!glob_match("a*", ""));
    }

    fn gate(autonomy: AutonomyLevel, allow: &[&str], ask: &[&str], deny: &[&str]) -> PolicyGate {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        PolicyGate::new(&ToolPolicyConfig {
            autonomy,
            allow: v(allow),
            ask: v(ask),
            deny: v(deny),
        })
    }

    #[test]
    fn exact_rules_beat_globs_and_strictest_wins() {
        let g = gate(AutonomyLevel::Full, &["file_read"], &["file_*"], &[]);
        assert_eq!(
            g.decide("file_read", RiskLevel::ReadOnly, "s"),
            PolicyDecision::Allow
        );
        assert_eq!(
            g.decide("file_write", RiskLevel::Write, "s"),
            PolicyDecision::Ask
        );
        let g = gate(AutonomyLevel::Full, &["*"], &[], &["SHELL"]);
        assert!(matches!(
            g.decide("shell", RiskLevel::Dangerous, "s"),
            PolicyDecision::Deny { .. }
        ));
        assert_eq!(
            g.decide("http_request", RiskLevel::Dangerous, "s"),
            PolicyDecision::Allow
        );
    }

    #[test]
    fn forget_session_prunes_only_that_sessions_entries() {
        let g = gate(AutonomyLevel::Supervised, &[], &[], &[]);
        g.allow_for_session("a", "shell");
        g.allow_for_session("a", "file_write");
        g.allow_for_session("b", "shell");
        g.forget_session("a");
        assert_eq!(
            g.decide("shell", RiskLevel::Dangerous, "a"),
            PolicyDecision::Ask
        );
        assert_eq!(
            g.decide("shell", RiskLevel::Dangerous, "b"),
            PolicyDecision::Allow
        );
        // The entry itself is gone, not just emptied: the table does not grow with
        // every session ever seen.
        assert_eq!(g.lock().keys().collect::<Vec<_>>(), ["b"]);
        g.forget_session("never-seen");
        assert_eq!(g.lock().len(), 1);
    }

    #[test]
    fn a_reconfigured_gate_keeps_session_allow_lists_under_its_own_rules() {
        let old = gate(AutonomyLevel::Supervised, &[], &[], &[]);
        old.allow_for_session("s", "shell");
        old.allow_for_session("s", "file_write");
        let new = old.reconfigured(&ToolPolicyConfig {
            deny: vec!["shell".into()],
            ..ToolPolicyConfig::default()
        });
        assert!(matches!(
            new.decide("shell", RiskLevel::Dangerous, "s"),
            PolicyDecision::Deny { .. }
        ));
        assert_eq!(
            new.decide("file_write", RiskLevel::Write, "s"),
            PolicyDecision::Allow
        );
        // One table: an answer given after the reload is seen by both.
        new.allow_for_session("t", "shell");
        assert!(old.session_allows("t", "shell"));
    }
}
