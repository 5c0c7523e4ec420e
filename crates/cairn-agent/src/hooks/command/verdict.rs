//! The blocking user hooks: `before_tool`, `on_message`,
//! `on_message_sending` and `before_llm_call`. Each is waited for; exit 0
//! goes on (with what it printed, if anything), exit 2 stops what it saw
//! with its stderr as the reason, and any other end (it cannot start, exits
//! otherwise, is killed by a signal, times out) stops it too: a hook that
//! guards something lets nothing through when it cannot give its verdict.

use serde_json::Value;

use super::{BLOCK_EXIT_CODE, HookEvent, HookExit, UserHook, UserHooks, failure, log_end};
use crate::safety::scrub::scrub;

/// What one blocking hook decided.
pub(super) enum Verdict {
    /// Go on; the JSON object it printed, if it printed one.
    Continue(Option<Value>),
    /// Stop, for this reason.
    Stop(String),
}

/// How the stopped thing is named in the reasons.
pub(super) struct Stopped {
    /// What the hook guards: "the call", "the message", …
    pub noun: &'static str,
    /// What exit 2 does to it: "blocked", "dropped".
    pub verb: &'static str,
}

impl UserHooks {
    /// Runs `hook` on `payload` (already scrubbed) and reads its verdict.
    pub(super) async fn verdict(
        &self,
        hook: &UserHook,
        payload: &Value,
        what: &Stopped,
    ) -> Verdict {
        match self.run(hook, payload).await {
            HookExit::Exited {
                code: Some(0),
                stdout,
                ..
            } => {
                let stdout = stdout.trim();
                if stdout.is_empty() {
                    return Verdict::Continue(None);
                }
                match serde_json::from_str::<Value>(stdout) {
                    Ok(object @ Value::Object(_)) => Verdict::Continue(Some(object)),
                    _ => {
                        tracing::warn!(hook = %hook.label, event = hook.event.as_str(), "hook printed something other than a JSON object");
                        Verdict::Continue(Some(Value::Null))
                    }
                }
            }
            HookExit::Exited {
                code: Some(BLOCK_EXIT_CODE),
                stderr,
                ..
            } => Verdict::Stop(if stderr.is_empty() {
                format!("{} {} {}", hook.label, what.verb, what.noun)
            } else {
                scrub(&stderr).into_owned()
            }),
            other => {
                log_end(hook, &other);
                Verdict::Stop(format!(
                    "{} gave no verdict ({}), so {} is {}; fix the hook or remove it",
                    hook.label,
                    failure(hook, &other),
                    what.noun,
                    what.verb
                ))
            }
        }
    }

    /// Runs the `event` hooks matching `name` in order on a text (the
    /// payload's `"text"`): each may replace it by printing `{"text": "…"}`
    /// or stop it. Anything else printed on stdout stops it too, as a hook
    /// that meant to change the text and could not (a redaction hook must
    /// not let the original through); logs go to stderr.
    pub(super) async fn text_hooks(
        &self,
        event: HookEvent,
        name: &str,
        mut payload: Value,
        text: &mut String,
        what: &Stopped,
    ) -> Result<(), String> {
        let hooks: Vec<UserHook> = self.matching(event, name).cloned().collect();
        payload["event"] = Value::from(event.as_str());
        for hook in hooks {
            payload["text"] = Value::from(text.as_str());
            let scrubbed = super::scrubbed(&payload);
            match self.verdict(&hook, &scrubbed, what).await {
                Verdict::Continue(None) => {}
                Verdict::Continue(Some(printed)) => match printed.get("text") {
                    Some(Value::String(new)) => new.clone_into(text),
                    _ => {
                        return Err(format!(
                            "{} printed something other than {{\"text\": \"…\"}}, so {} is {}; \
                             print nothing to keep it, and logs to stderr",
                            hook.label, what.noun, what.verb
                        ));
                    }
                },
                Verdict::Stop(reason) => return Err(reason),
            }
        }
        Ok(())
    }
}
