//! Leak detection (issue 47): secret values, and keys known by their shape,
//! looked for in everything that leaves.
//!
//! [`LeakScanner`] finds them; [`LeakGuard`] holds the scanner in force (a
//! reload or a change of the vault replaces it) and records what it finds
//! through a [`LeakRecorder`] (the store's `secret_leaks` and an attention
//! notification). Where it looks, and what a hit does:
//! - a tool call's arguments, before it runs ([`crate::runner::ToolRunner`]):
//!   the call is refused, its result names the secret;
//! - a message a channel sends, a hook's input: not sent, not run;
//! - a request to the LLM ([`crate::cost_guard::GuardedProvider`]): the
//!   value is replaced by `[secret:NAME]`, and so is what is stored
//!   (the person's message, tool results, the model's calls).

mod origin;
mod record;
pub mod scanner;
pub mod shapes;
pub mod stream;

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use cairn_core::chat::ChatMessage;
use cairn_core::live::Live;
use serde_json::Value;

pub use origin::{LeakOrigin, in_run};
pub use record::{LeakRecorder, StoreLeakRecorder};
pub use scanner::{LeakHit, LeakScanner, MIN_SECRET_CHARS, WatchedSecret, placeholder};
pub use stream::StreamCheck;

/// Where a secret was going when it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeakPlace {
    /// A tool call's arguments.
    Tool,
    /// A message a channel sends (a notification, a chat reply).
    Channel,
    /// A hook's input.
    Hook,
    /// A request to the LLM.
    Llm,
}

impl LeakPlace {
    /// As recorded and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Channel => "channel",
            Self::Hook => "hook",
            Self::Llm => "llm",
        }
    }
}

/// One leak found, before it is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundLeak {
    /// The secret's name.
    pub secret: String,
    /// Where it was going.
    pub place: LeakPlace,
    /// Which tool, channel or hook, or the model.
    pub target: String,
    /// Whose it was.
    pub origin: LeakOrigin,
    /// A short excerpt, the value replaced.
    pub context: String,
}

/// The scanner in force and where its findings are recorded; shared by the
/// runner, the providers, the channels and the hooks of a process.
#[derive(Clone)]
pub struct LeakGuard {
    scanner: Live<LeakScanner>,
    recorder: Arc<OnceLock<Arc<dyn LeakRecorder>>>,
    /// The agent whose parts hold this guard ([`Self::for_agent`]).
    agent: Option<Arc<str>>,
}

impl std::fmt::Debug for LeakGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeakGuard")
            .field("scanner", &self.scanner.get())
            .finish_non_exhaustive()
    }
}

impl Default for LeakGuard {
    fn default() -> Self {
        Self::new(&[])
    }
}

impl LeakGuard {
    /// A guard watching `secrets` (and the key shapes).
    pub fn new(secrets: &[WatchedSecret]) -> Self {
        Self {
            scanner: Live::new(Arc::new(LeakScanner::new(secrets))),
            recorder: Arc::default(),
            agent: None,
        }
    }

    /// This guard (the same scanner, replaced with it, and recorder) as
    /// `agent`'s: what it finds is recorded as that agent's unless the
    /// finder says whose.
    pub fn for_agent(&self, agent: &str) -> Self {
        Self {
            agent: Some(Arc::from(agent)),
            ..self.clone()
        }
    }

    /// Watches `secrets` from now on, for every clone of this guard.
    pub fn replace(&self, secrets: &[WatchedSecret]) {
        self.scanner.set(Arc::new(LeakScanner::new(secrets)));
    }

    /// The scanner in force now.
    pub fn scanner(&self) -> Arc<LeakScanner> {
        self.scanner.get()
    }

    /// Where findings are recorded from now on; only the first attachment counts.
    pub fn attach_recorder(&self, recorder: Arc<dyn LeakRecorder>) {
        let _ = self.recorder.set(recorder);
    }

    /// The secrets in `text` on its way to `place`/`target`, each recorded;
    /// their names, each once (empty when clean).
    pub async fn check(
        &self,
        place: LeakPlace,
        target: &str,
        text: &str,
        origin: &LeakOrigin,
    ) -> Vec<String> {
        let scanner = self.scanner.get();
        let hits = scanner.scan(text);
        if hits.is_empty() {
            return Vec::new();
        }
        let context = excerpt(text, &hits);
        let origin = &origin::completed(origin, self.agent.as_deref());
        let mut names: Vec<String> = Vec::new();
        for hit in hits {
            if !names.contains(&hit.name) {
                names.push(hit.name);
            }
        }
        for name in &names {
            self.record(FoundLeak {
                secret: name.clone(),
                place,
                target: target.to_string(),
                origin: origin.clone(),
                context: context.clone(),
            })
            .await;
        }
        names
    }

    /// [`Self::check`] for a caller that cannot wait: the names found now,
    /// recorded in the background.
    pub fn check_detached(
        &self,
        place: LeakPlace,
        target: &str,
        text: &str,
        origin: &LeakOrigin,
    ) -> Vec<String> {
        let names = self.scanner.get().names_in(text);
        if !names.is_empty()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            // Completed here: the task-local run scope does not reach the task.
            let (guard, target, text, origin) = (
                self.clone(),
                target.to_string(),
                text.to_string(),
                origin::completed(origin, self.agent.as_deref()),
            );
            runtime.spawn(async move { guard.check(place, &target, &text, &origin).await });
        }
        names
    }

    /// [`Self::check`] over every string of a JSON value (keys included).
    pub async fn check_json(
        &self,
        place: LeakPlace,
        target: &str,
        value: &Value,
        origin: &LeakOrigin,
    ) -> Vec<String> {
        let mut strings = Vec::new();
        json_strings(value, &mut strings);
        self.check(place, target, &strings.join("\n"), origin).await
    }

    /// `text` with every secret replaced by `[secret:NAME]` (nothing recorded).
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.scanner.get().redact(text)
    }

    /// A person's message on `channel` with every secret replaced by its
    /// name, each found recorded as kept from the model.
    pub async fn redact_found(&self, text: &str, channel: &str) -> String {
        let scanner = self.scanner.get();
        let clean = scanner.redact(text);
        if let Cow::Owned(clean) = clean {
            let origin = LeakOrigin::session(channel);
            self.check(LeakPlace::Llm, "the person's message", text, &origin)
                .await;
            return clean;
        }
        text.to_string()
    }

    /// `value` with every secret in its strings replaced; `None` when clean.
    pub fn redact_json(&self, value: &Value) -> Option<Value> {
        redact_json(&self.scanner.get(), value)
    }

    /// A message with every secret in its text and its calls' arguments
    /// replaced; `None` when it holds none.
    pub fn redact_message(&self, message: &ChatMessage) -> Option<ChatMessage> {
        let scanner = self.scanner.get();
        let content = scanner.redact(&message.content);
        let calls: Vec<Option<Value>> = message
            .tool_calls
            .iter()
            .map(|c| redact_json(&scanner, &c.arguments))
            .collect();
        if matches!(content, Cow::Borrowed(_)) && calls.iter().all(Option::is_none) {
            return None;
        }
        let mut redacted = message.clone();
        redacted.content = content.into_owned();
        for (call, clean) in redacted.tool_calls.iter_mut().zip(calls) {
            if let Some(clean) = clean {
                call.arguments = clean;
            }
        }
        Some(redacted)
    }

    /// `messages` (on their way to `target`, the model) with every secret
    /// replaced, each found recorded; `None` when they hold none (nothing
    /// is copied then).
    pub async fn redact_messages(
        &self,
        messages: &[ChatMessage],
        target: &str,
        origin: &LeakOrigin,
    ) -> Option<Vec<ChatMessage>> {
        let mut cleaned: Option<Vec<ChatMessage>> = None;
        for (index, message) in messages.iter().enumerate() {
            let Some(clean) = self.redact_message(message) else {
                continue;
            };
            let mut text = message.content.clone();
            for call in &message.tool_calls {
                text.push('\n');
                text.push_str(&call.arguments.to_string());
            }
            self.check(LeakPlace::Llm, target, &text, origin).await;
            let all = cleaned.get_or_insert_with(|| messages.to_vec());
            if let Some(slot) = all.get_mut(index) {
                *slot = clean;
            }
        }
        cleaned
    }

    async fn record(&self, leak: FoundLeak) {
        tracing::warn!(
            secret = %leak.secret,
            place = leak.place.as_str(),
            target = %leak.target,
            "a secret was found on its way out"
        );
        if let Some(recorder) = self.recorder.get() {
            recorder.record(leak).await;
        }
    }
}

/// `text` with every secret `guard` watches replaced (as it is when none).
pub fn redacted<'a>(guard: Option<&LeakGuard>, text: &'a str) -> Cow<'a, str> {
    guard.map_or(Cow::Borrowed(text), |g| g.redact(text))
}

/// The refusal of a call to `tool` whose arguments hold a secret (each
/// recorded), or `None` when they hold none or nothing watches.
pub async fn check_call(
    guard: Option<&LeakGuard>,
    tool: &str,
    args: &Value,
    session_id: &str,
) -> Option<String> {
    let origin = LeakOrigin::session(session_id);
    let names = guard?
        .check_json(LeakPlace::Tool, tool, args, &origin)
        .await;
    (!names.is_empty()).then(|| blocked_text(&names, "the call's arguments"))
}

/// The answer going back to the person, or, when it holds a secret
/// (recorded), a notice withholding it.
pub async fn withhold(guard: Option<&LeakGuard>, text: String, session_id: &str) -> String {
    let Some(guard) = guard else { return text };
    let origin = LeakOrigin::session(session_id);
    let names = guard
        .check(LeakPlace::Channel, "chat reply", &text, &origin)
        .await;
    if names.is_empty() {
        return text;
    }
    withheld_text(&names)
}

/// What the person is shown instead of an answer holding the secrets `names`.
pub fn withheld_text(names: &[String]) -> String {
    format!(
        "[cairn withheld this answer: it contained the secret {}; see `cairn secret leaks`]",
        names.join(", ")
    )
}

/// What the model reads when a call is refused for a secret in it.
pub fn blocked_text(names: &[String], what: &str) -> String {
    let shown: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    format!(
        "blocked: the secret {} was found in {what}, which may not carry it (its value is never \
         given to the model); the attempt was recorded. Do not retry with the value; a credential \
         bound to a host is added by cairn itself",
        shown.join(", ")
    )
}

/// Most characters of a record's excerpt.
const EXCERPT_CHARS: usize = 200;

/// The text around the first hit, every hit replaced.
fn excerpt(text: &str, hits: &[LeakHit]) -> String {
    let redacted = scanner::replace(text, hits);
    let first = hits.first().map_or(0, |h| h.start).min(redacted.len());
    let mut start = first.saturating_sub(EXCERPT_CHARS / 2);
    while !redacted.is_char_boundary(start) {
        start -= 1;
    }
    let shown: String = redacted[start..].chars().take(EXCERPT_CHARS).collect();
    let cut_before = if start > 0 { "…" } else { "" };
    let cut_after = if redacted[start..].chars().count() > EXCERPT_CHARS {
        "…"
    } else {
        ""
    };
    format!("{cut_before}{shown}{cut_after}")
}

fn json_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| json_strings(v, out)),
        Value::Object(map) => {
            for (key, v) in map {
                out.push(key);
                json_strings(v, out);
            }
        }
        _ => {}
    }
}

/// `value` with every secret in its strings replaced; `None` when clean.
fn redact_json(scanner: &LeakScanner, value: &Value) -> Option<Value> {
    match value {
        Value::String(s) => match scanner.redact(s) {
            Cow::Borrowed(_) => None,
            Cow::Owned(clean) => Some(Value::String(clean)),
        },
        Value::Array(items) => {
            let cleaned: Vec<Option<Value>> =
                items.iter().map(|v| redact_json(scanner, v)).collect();
            cleaned.iter().any(Option::is_some).then(|| {
                Value::Array(
                    items
                        .iter()
                        .zip(cleaned)
                        .map(|(v, c)| c.unwrap_or_else(|| v.clone()))
                        .collect(),
                )
            })
        }
        Value::Object(map) => {
            let mut changed = false;
            let cleaned: serde_json::Map<String, Value> = map
                .iter()
                .map(|(k, v)| {
                    let key = scanner.redact(k).into_owned();
                    changed |= key != *k;
                    let v = match redact_json(scanner, v) {
                        Some(clean) => {
                            changed = true;
                            clean
                        }
                        None => v.clone(),
                    };
                    (key, v)
                })
                .collect();
            changed.then_some(Value::Object(cleaned))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
