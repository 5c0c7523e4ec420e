//! A sub-agent's tools: those asked for (names or globs; all when none
//! are named) that its parent may use — offered to it and not denied by
//! its policy — and, for a named agent, that this agent has and may use
//! too. Never more than the parent: the sub-agent runs under the parent's
//! policy, so what the gate asks or refuses stays as it was.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::names::normalize_name;
use crate::policy::{PolicyDecision, glob_match};
use crate::runner::ToolRunner;
use crate::tools::{RiskLevel, ToolError};

/// The tools a runner may use at all: offered (not disabled) and not
/// refused outright by its policy's rules. Judged at the lowest risk: a
/// tool the parent may call for reading only is the sub-agent's to call
/// the same way, the gate judging each call.
fn usable(runner: &ToolRunner, session: &str) -> BTreeSet<String> {
    let policy = runner.policy();
    let health = runner.health();
    runner
        .registry()
        .list()
        .iter()
        .map(|tool| tool.spec().name().to_string())
        .filter(|name| !health.is_some_and(|h| h.is_disabled(name)))
        .filter(|name| {
            !matches!(
                policy.decide(name, RiskLevel::ReadOnly, session),
                PolicyDecision::Deny { .. }
            )
        })
        .collect()
}

/// The runner of a sub-agent of a turn on `parent` in `session` (see the
/// module), and the names asked for that matched none of its tools.
pub(super) fn child_runner(
    parent: &Arc<ToolRunner>,
    session: &str,
    asked: Option<&[String]>,
    agent: Option<&ToolRunner>,
) -> Result<(Arc<ToolRunner>, Vec<String>), ToolError> {
    let mut allowed = usable(parent, session);
    if let Some(agent) = agent {
        let theirs = usable(agent, "");
        allowed.retain(|name| theirs.contains(name));
    }
    let registry = parent.registry();
    let mut withheld = Vec::new();
    if let Some(asked) = asked {
        let patterns: Vec<(String, String)> = asked
            .iter()
            .map(|p| {
                let wanted = normalize_name(p);
                // An alias names its tool.
                let canonical = registry.resolve(&wanted).unwrap_or(&wanted).to_string();
                (p.clone(), canonical)
            })
            .collect();
        let matches = |pattern: &str, name: &str| glob_match(pattern, name);
        for (written, pattern) in &patterns {
            if !allowed.iter().any(|name| matches(pattern, name)) {
                withheld.push(written.clone());
            }
        }
        allowed.retain(|name| patterns.iter().any(|(_, p)| matches(p, name)));
    }
    let keep: Arc<dyn Fn(&str) -> bool + Send + Sync> =
        Arc::new(move |name: &str| allowed.contains(name));
    let tools = registry
        .subset(keep)
        .map_err(|e| ToolError::Failed(format!("cannot set up the sub-agent's tools: {e}")))?;
    let runner = ToolRunner::new(Arc::new(tools), parent.policy());
    if let Some(health) = parent.health() {
        runner.attach_health(Arc::clone(health));
    }
    Ok((Arc::new(runner), withheld))
}
