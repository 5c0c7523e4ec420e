//! The heartbeat: a [`SystemTask`] that checks `HEARTBEAT.md` every
//! `heartbeat.interval_secs` and tells the person only when something needs
//! them.
//!
//! Each beat, in order:
//!
//! 1. **Backing off?** After `max_failures` failed beats in a row the
//!    effective interval doubles (and doubles again on each further failure,
//!    up to [`MAX_BACKOFF_FACTOR`] times); beats before the recorded
//!    `backoff_until` are `ok` and say "skipped: backing off", no call.
//! 2. **Active hours.** Outside `heartbeat.active_hours` (in the user's zone)
//!    the beat is `ok`, "skipped: outside active hours", no call.
//! 3. **The checklist.** `HEARTBEAT.md` in the workspace; missing or
//!    [effectively empty](is_effectively_empty) (headings, blank lines,
//!    `<!-- comments -->`, empty list items) → `ok`, "skipped: empty
//!    checklist", no call at all.
//! 4. **One light call** on the cheap provider with the checklist, the time
//!    and the user's zone (no conversation). A reply of `HEARTBEAT_OK` is
//!    `ok` and silent; anything else is `attention` with the reply as the
//!    summary, which the engine sends to the routine's notify channel and
//!    user (`heartbeat.notify_channel` / `heartbeat.notify_user`). Tokens are
//!    recorded on the run.
//!
//! A failed call is a `failed` run (the routine's notify settings keep those
//! quiet); the beat that reaches `max_failures` sends one notice saying the
//! heartbeat is backing off. The counter and `backoff_until` live in the
//! routine's JSON state (`{"failures": n, "backoff_until": "…"}`), so every
//! daemon on the database sees them; a successful call clears them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::nofollow::Tree;
use cairn_core::active_hours::ActiveHours;
use cairn_core::chat::ChatMessage;
use cairn_core::clock::Clock;
use cairn_core::routine::RunStatus;
use cairn_llm::{ChatRequest, LlmProvider};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::json;

use super::action::{ActionOutcome, ActionRequest, Notice};
use super::system::{SystemRoutine, SystemTask};

/// The system routine's (and task's) name.
pub const HEARTBEAT: &str = "heartbeat";

/// The checklist file, relative to the workspace.
pub const HEARTBEAT_FILE: &str = "HEARTBEAT.md";

/// The reply that means "nothing needs attention".
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";

/// The effective interval grows to at most this many times the configured one.
pub const MAX_BACKOFF_FACTOR: u32 = 16;

/// Characters of the checklist given to the model.
const CHECKLIST_CHARS: usize = 8_000;

/// Upper bound on the reply: a heartbeat answer is a line or a short note.
const REPLY_TOKENS: u32 = 400;

const SYSTEM_PROMPT: &str = "You are cairn, a personal AI agent, doing your periodic heartbeat \
check on your own: nobody is watching and you have no tools. Go through the person's checklist \
with the time given. If nothing on it needs their attention now, reply with exactly HEARTBEAT_OK \
and nothing else. Otherwise reply with a short message saying what needs their attention.";

/// How the heartbeat runs.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatSettings {
    /// Time between beats.
    pub interval: Duration,
    /// When beats may call the LLM (always when `None`).
    pub active_hours: Option<ActiveHours>,
    /// The user's zone, for active hours and the time in the prompt.
    pub zone: Tz,
    /// Failed beats in a row before backing off (at least 1).
    pub max_failures: u32,
    /// Whether it runs at all.
    pub enabled: bool,
    /// Channel its findings go to (the default channel when `None`).
    pub notify_channel: Option<String>,
    /// User told of its findings (the routine's owner when `None`).
    pub notify_user: Option<String>,
}

impl HeartbeatSettings {
    /// Every `interval`, always active, backing off after 3 failures, in `zone`.
    pub fn new(interval: Duration, zone: Tz) -> Self {
        Self {
            interval,
            active_hours: None,
            zone,
            max_failures: 3,
            enabled: true,
            notify_channel: None,
            notify_user: None,
        }
    }

    /// The system routine that runs the heartbeat with these settings.
    pub fn routine(&self) -> SystemRoutine {
        let mut routine = SystemRoutine::every(
            HEARTBEAT,
            "checks HEARTBEAT.md and tells you when something needs attention",
            self.interval,
        );
        routine.enabled = self.enabled;
        routine.notify.channel = self.notify_channel.clone();
        routine.notify.user = self.notify_user.clone();
        // One LLM call: far less than a beat's interval in any sane setup.
        routine.timeout = Some(Duration::from_secs(300));
        routine
    }
}

/// The heartbeat task.
pub struct Heartbeat {
    // Replaced by a configuration reload (`reload`); each beat reads a copy.
    settings: std::sync::RwLock<HeartbeatSettings>,
    workspace: PathBuf,
    llm: Option<Arc<dyn LlmProvider>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat")
            .field("settings", &self.settings())
            .field("workspace", &self.workspace)
            .field("llm", &self.llm.as_ref().map(|l| l.model().to_string()))
            .finish()
    }
}

impl Heartbeat {
    /// A heartbeat reading `HEARTBEAT.md` in `workspace` and calling `llm`
    /// (the cheap provider; `None` when no LLM is configured: a non-empty
    /// checklist then fails saying so).
    pub fn new(
        settings: HeartbeatSettings,
        workspace: impl Into<PathBuf>,
        llm: Option<Arc<dyn LlmProvider>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            settings: std::sync::RwLock::new(settings),
            workspace: workspace.into(),
            llm,
            clock,
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> HeartbeatSettings {
        self.settings
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the settings (a configuration reload); the next beat uses them.
    /// The routine's interval and `enabled` are the stored routine's: the
    /// caller ensures it again ([`HeartbeatSettings::routine`]).
    pub fn reload(&self, settings: HeartbeatSettings) {
        *self.settings.write().unwrap_or_else(|p| p.into_inner()) = settings;
    }

    async fn beat(&self, request: &ActionRequest) -> ActionOutcome {
        let now = self.clock.now();
        let settings = self.settings();
        let state = BeatState::read(&request.routine.runtime.state);
        if let Some(until) = state.backoff_until
            && now < until
        {
            return ActionOutcome::new(
                RunStatus::Ok,
                format!(
                    "skipped: backing off after {} failed beat(s) in a row; next attempt at {}",
                    state.failures,
                    until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ),
            );
        }
        if let Some(hours) = &settings.active_hours
            && !hours.contains(now, settings.zone)
        {
            return ActionOutcome::new(
                RunStatus::Ok,
                format!("skipped: outside active hours ({hours} {})", settings.zone),
            );
        }
        // Through the no-follow walk: a planted link or hard link is refused.
        let read = Tree::new(&self.workspace)
            .run(|tree| tree.read(Path::new(HEARTBEAT_FILE), u64::MAX))
            .await;
        let checklist = match read {
            Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(None) => String::new(),
            Err(e) => {
                return self.failure(
                    request,
                    state,
                    now,
                    format!("cannot read {HEARTBEAT_FILE}: {e}"),
                );
            }
        };
        if is_effectively_empty(&checklist) {
            return ActionOutcome::new(RunStatus::Ok, "skipped: empty checklist");
        }
        let Some(llm) = &self.llm else {
            return self.failure(
                request,
                state,
                now,
                "no LLM provider is configured; the heartbeat needs one for a non-empty \
                 HEARTBEAT.md (set CAIRN_LLM_PROVIDER, or empty the file)"
                    .to_string(),
            );
        };
        let chat = heartbeat_request(&checklist, now, settings.zone);
        let response = tokio::select! {
            biased;
            () = request.cancel.cancelled() => return ActionOutcome::failed("cancelled before the LLM answered"),
            response = llm.complete(&chat) => response,
        };
        let response = match response {
            Ok(response) => response,
            Err(e) => return self.failure(request, state, now, e.to_string()),
        };
        let mut tokens = response
            .usage
            .input_tokens
            .saturating_add(response.usage.output_tokens);
        if tokens == 0 {
            // A provider that reports no usage: the repo's estimate rather than nothing.
            tokens = estimate_tokens(&chat, &response.text);
        }
        let mut outcome = if is_heartbeat_ok(&response.text) {
            ActionOutcome::new(RunStatus::Ok, HEARTBEAT_OK)
        } else {
            ActionOutcome::new(RunStatus::Attention, response.text.trim())
        };
        outcome.tokens_used = Some(tokens);
        if state.failures > 0 || state.backoff_until.is_some() {
            outcome.state = Some(json!({}));
        }
        outcome
    }

    /// A failed beat: counts it and, from `max_failures` on, backs off.
    fn failure(
        &self,
        request: &ActionRequest,
        state: BeatState,
        now: DateTime<Utc>,
        reason: String,
    ) -> ActionOutcome {
        let failures = state.failures.saturating_add(1);
        let max = self.settings().max_failures.max(1);
        let mut outcome = ActionOutcome::failed(reason.clone());
        let mut next = json!({ "failures": failures });
        if failures >= max {
            let factor = backoff_factor(failures, max);
            let effective = self.settings().interval.saturating_mul(factor);
            // From the slot, so the next allowed beat lands on the grid.
            let from = request.fire.scheduled_for.unwrap_or(now);
            let until = from + chrono::Duration::from_std(effective).unwrap_or_default();
            next["backoff_until"] = json!(until);
            next["effective_interval_secs"] = json!(effective.as_secs());
            outcome.summary = Some(format!(
                "{reason}\n(failed {failures} time(s) in a row: backing off, next attempt at {})",
                until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ));
            if failures == max {
                outcome.notice = Some(Notice {
                    title: Some("heartbeat is failing".to_string()),
                    body: format!(
                        "The heartbeat failed {failures} times in a row (last: {reason}). It keeps \
                         trying, less often: every {} until a beat succeeds.",
                        cairn_core::duration::format(effective)
                    ),
                });
            }
        }
        outcome.state = Some(next);
        outcome
    }
}

#[async_trait]
impl SystemTask for Heartbeat {
    async fn run(&self, request: &ActionRequest) -> ActionOutcome {
        self.beat(request).await
    }
}

/// The failure counter and backoff, as kept in the routine's JSON state.
#[derive(Debug, Clone, Copy, Default)]
struct BeatState {
    failures: u32,
    backoff_until: Option<DateTime<Utc>>,
}

impl BeatState {
    fn read(state: &serde_json::Value) -> Self {
        Self {
            failures: state
                .get("failures")
                .and_then(serde_json::Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0),
            backoff_until: state
                .get("backoff_until")
                .and_then(|v| serde_json::from_value(v.clone()).ok()),
        }
    }
}

/// How many times the interval the heartbeat waits after `failures` failed
/// beats in a row: 2 at `max`, doubling with each further failure, capped.
pub fn backoff_factor(failures: u32, max: u32) -> u32 {
    if failures < max {
        return 1;
    }
    let doublings = (failures - max + 1).min(MAX_BACKOFF_FACTOR.ilog2());
    1u32 << doublings
}

/// Whether a checklist has nothing to check: only headings, blank lines,
/// HTML comments and list items without text (`- `, `- [ ]`, `1.`).
pub fn is_effectively_empty(text: &str) -> bool {
    let mut rest = text;
    let mut visible = String::new();
    // Comments may span lines: drop them before looking at lines.
    while let Some(start) = rest.find("<!--") {
        visible.push_str(&rest[..start]);
        match rest[start..].find("-->") {
            Some(end) => rest = &rest[start + end + 3..],
            None => {
                rest = "";
                break;
            }
        }
    }
    visible.push_str(rest);
    visible.lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#') || list_marker_only(line)
    })
}

/// `-`, `*`, `+`, `1.` or `1)`, optionally followed by a checkbox, and nothing else.
fn list_marker_only(line: &str) -> bool {
    let after_marker = if let Some(rest) = line.strip_prefix(['-', '*', '+']) {
        rest
    } else {
        let digits = line.trim_start_matches(|c: char| c.is_ascii_digit());
        if digits.len() == line.len() {
            return false;
        }
        match digits.strip_prefix(['.', ')']) {
            Some(rest) => rest,
            None => return false,
        }
    };
    let rest = after_marker.trim();
    let rest = ["[ ]", "[x]", "[X]", "[]"]
        .iter()
        .find_map(|b| rest.strip_prefix(b))
        .unwrap_or(rest);
    rest.trim().is_empty()
}

/// Whether a reply means "nothing needs attention": `HEARTBEAT_OK` alone,
/// allowing whitespace, backticks and a final period around it.
pub fn is_heartbeat_ok(reply: &str) -> bool {
    let bare = reply.trim().trim_end_matches('.').trim_matches('`');
    bare.trim_end_matches('.').trim() == HEARTBEAT_OK
}

/// The one request a beat makes: the instructions, the time in the user's
/// zone and the checklist; nothing of any conversation.
pub fn heartbeat_request(checklist: &str, now: DateTime<Utc>, zone: Tz) -> ChatRequest {
    let local = now.with_timezone(&zone);
    let checklist = match checklist.char_indices().nth(CHECKLIST_CHARS) {
        Some((i, _)) => format!(
            "{}\n[… cut at {CHECKLIST_CHARS} characters]",
            &checklist[..i]
        ),
        None => checklist.to_string(),
    };
    let user = format!(
        "Now: {} ({zone})\n\n## {HEARTBEAT_FILE}\n{}\n",
        local.format("%A %Y-%m-%d %H:%M"),
        checklist.trim()
    );
    ChatRequest {
        max_tokens: Some(REPLY_TOKENS),
        ..ChatRequest::new(vec![
            ChatMessage::system(SYSTEM_PROMPT),
            ChatMessage::user(user),
        ])
    }
}

/// Tokens of a beat by the repo's estimator (`cairn_agent::context`): the
/// request's messages plus the reply.
pub fn estimate_tokens(request: &ChatRequest, reply: &str) -> u64 {
    let prompt: usize = request
        .messages
        .iter()
        .map(cairn_agent::context::estimate_message)
        .sum();
    u64::try_from(prompt + cairn_agent::context::estimate_text(reply)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn empty_checklists() {
        for text in [
            "",
            "\n\n",
            "# Heartbeat\n\n## Daily\n",
            "# Checks\n<!-- add things to check here -->\n- \n- [ ]\n* [x]\n1.\n",
            "<!--\nmulti\nline\n-->\n# H\n",
        ] {
            assert!(is_effectively_empty(text), "{text:?}");
        }
        for text in [
            "- check the inbox",
            "# H\n- [ ] water the plants\n",
            "<!-- c --> look at the backups",
            "plain words",
            "12 unread?",
        ] {
            assert!(!is_effectively_empty(text), "{text:?}");
        }
    }

    #[test]
    fn ok_replies() {
        assert!(is_heartbeat_ok("HEARTBEAT_OK"));
        assert!(is_heartbeat_ok(" `HEARTBEAT_OK`.\n"));
        assert!(!is_heartbeat_ok("HEARTBEAT_OK but the disk is full"));
    }

    #[test]
    fn backoff_doubles_then_caps() {
        assert_eq!(backoff_factor(1, 3), 1);
        assert_eq!(backoff_factor(2, 3), 1);
        assert_eq!(backoff_factor(3, 3), 2);
        assert_eq!(backoff_factor(4, 3), 4);
        assert_eq!(backoff_factor(5, 3), 8);
        assert_eq!(backoff_factor(6, 3), 16);
        assert_eq!(backoff_factor(60, 3), 16);
    }
}
