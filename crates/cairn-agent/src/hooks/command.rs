//! User hooks: the `[[hooks]]` commands of config.toml, run at the agent's
//! hook points with a JSON description of the event on standard input.
//!
//! - `before_tool`: exit 0 continues, and a JSON object on stdout replaces the
//!   call's arguments (before the schema check and the policy gate, so a hook
//!   never bypasses approval); exit 2 blocks the call and its stderr is the
//!   result the model sees. A policy hook fails closed: any other end (it
//!   cannot start, exits otherwise, is killed by a signal, times out) blocks
//!   the call too, with a result saying why.
//! - `on_message` (an inbound message, before the agent sees it) and
//!   `on_message_sending` (an answer, before any channel sends it): exit 0
//!   continues, and `{"text": "…"}` on stdout replaces the text; exit 2 drops
//!   it with its stderr as the reason. They fail closed like `before_tool`:
//!   a hook that cannot answer drops the message, as a filter or redaction
//!   hook must not be bypassed by breaking. With an `on_message_sending`
//!   hook no answer is streamed as it is written.
//! - `before_llm_call`: sees `{"model", "messages": count, "tools": [names]}`;
//!   exit 2 (or failing) stops the turn with its reason.
//! - `after_tool`, `on_session_end`, `on_routine_run`:
//!   notifications, started in the background so a slow hook never delays an
//!   answer; their exit codes are logged.
//!
//! Every command runs through `/bin/sh -c` in the shell sandbox
//! ([`crate::sandbox`]) with the workspace as its directory, a timeout that
//! kills its whole process group, and an event whose strings went through
//! [`scrub`] (no secrets). The files its command line names (its script, by
//! absolute path or found on `PATH`) and their interpreters (`#!`) are
//! readable and executable inside, each by a Landlock rule of its own, never
//! by opening their directory: a script beside cairn's home runs, the home
//! stays closed. [`UserHooks::dry_run`] starts one on a sample event marked
//! `"dry_run": true` (`cairn doctor`).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_core::chat::ToolCall;
use cairn_core::config::Section;
use cairn_llm::ChatRequest;
use regex::Regex;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::{Hook, HookFlow};
use crate::runner::ToolResult;
use crate::safety::scrub::scrub;
use crate::sandbox::{Sandbox, SandboxSettings};
use crate::tools::shell::{GroupKiller, read_capped};

mod named;
mod verdict;

/// Seconds a hook may run when its entry does not say.
pub const DEFAULT_TIMEOUT_SECS: u64 = 10;
/// Bytes kept of a hook's stdout and of its stderr.
const MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// The exit code by which a `before_tool` hook blocks the call.
pub const BLOCK_EXIT_CODE: i32 = 2;

/// The hook points a user hook can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before a tool call (may change or block it).
    BeforeTool,
    /// After a tool call, with its result.
    AfterTool,
    /// A message arrived on a channel (may replace or drop it).
    OnMessage,
    /// An answer is about to leave (may replace or drop it).
    OnMessageSending,
    /// The model is about to be called (may block the call).
    BeforeLlmCall,
    /// An idle session was closed.
    OnSessionEnd,
    /// A routine run finished.
    OnRoutineRun,
}

impl HookEvent {
    /// Its name, as config.toml writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BeforeTool => "before_tool",
            Self::AfterTool => "after_tool",
            Self::OnMessage => "on_message",
            Self::OnMessageSending => "on_message_sending",
            Self::BeforeLlmCall => "before_llm_call",
            Self::OnSessionEnd => "on_session_end",
            Self::OnRoutineRun => "on_routine_run",
        }
    }

    /// True for the events whose hook is waited for and may stop what it
    /// sees (exit 2); these fail closed.
    pub fn blocks(self) -> bool {
        matches!(
            self,
            Self::BeforeTool | Self::OnMessage | Self::OnMessageSending | Self::BeforeLlmCall
        )
    }

    /// What a blocking hook's exit 2 does, for `cairn doctor`.
    pub fn blocked(self) -> &'static str {
        match self {
            Self::BeforeTool => "the calls it matches are blocked",
            Self::OnMessage => "the messages it matches are dropped",
            Self::OnMessageSending => "every answer is dropped",
            Self::BeforeLlmCall => "the model calls it matches are blocked",
            _ => "",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    event: HookEvent,
    matcher: Option<String>,
    command: String,
    timeout_secs: Option<u64>,
}

/// One configured hook.
#[derive(Debug, Clone)]
pub struct UserHook {
    /// `hooks[N]`, for logs and errors.
    pub label: String,
    /// When it runs.
    pub event: HookEvent,
    /// Which tool, channel or routine names it applies to (all when `None`).
    pub matcher: Option<Regex>,
    /// The shell command.
    pub command: String,
    /// How long it may run.
    pub timeout: Duration,
}

/// A `[[hooks]]` entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config.toml line {line}: hooks[{index}]: {message}")]
pub struct HookConfigError {
    /// Line where `[[hooks]]` starts.
    pub line: usize,
    /// 0-based position of the entry.
    pub index: usize,
    /// What is wrong.
    pub message: String,
}

/// Reads the `[[hooks]]` array; every bad entry (unknown event, invalid
/// regex, empty command, zero timeout) is an error naming it.
pub fn parse_hooks(section: Option<&Section>) -> Result<Vec<UserHook>, Vec<HookConfigError>> {
    let Some(section) = section else {
        return Ok(Vec::new());
    };
    let err = |index, message: String| HookConfigError {
        line: section.line,
        index,
        message,
    };
    let Value::Array(items) = &section.value else {
        return Err(vec![err(
            0,
            "write each hook as a `[[hooks]]` table".to_string(),
        )]);
    };
    let (mut hooks, mut errors) = (Vec::new(), Vec::new());
    for (index, item) in items.iter().enumerate() {
        let entry: Entry = match serde_json::from_value(item.clone()) {
            Ok(entry) => entry,
            Err(e) => {
                errors.push(err(index, e.to_string()));
                continue;
            }
        };
        let matcher = match entry.matcher.as_deref().map(Regex::new).transpose() {
            Ok(m) => m,
            Err(e) => {
                errors.push(err(index, format!("matcher is not a valid regex: {e}")));
                continue;
            }
        };
        if entry.command.trim().is_empty() {
            errors.push(err(index, "command is empty".to_string()));
            continue;
        }
        let secs = entry.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if secs == 0 {
            errors.push(err(index, "timeout_secs must be at least 1".to_string()));
            continue;
        }
        // The answer's channel is not known where it leaves: a matcher would
        // silently never match, and a redaction hook must not be skipped.
        if entry.event == HookEvent::OnMessageSending && matcher.is_some() {
            errors.push(err(
                index,
                "on_message_sending hooks see every answer and take no matcher".to_string(),
            ));
            continue;
        }
        hooks.push(UserHook {
            label: format!("hooks[{index}]"),
            event: entry.event,
            matcher,
            command: entry.command,
            timeout: Duration::from_secs(secs),
        });
    }
    if errors.is_empty() {
        Ok(hooks)
    } else {
        Err(errors)
    }
}

/// How a hook's command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookExit {
    /// It exited with this code (`None`: killed by a signal).
    Exited {
        /// The exit code.
        code: Option<i32>,
        /// Its standard output (capped).
        stdout: String,
        /// Its standard error (capped).
        stderr: String,
    },
    /// It ran past its timeout; its process group was killed.
    TimedOut,
    /// It could not be started.
    NotStarted(String),
}

/// The user hooks of one agent, registered as one [`Hook`].
#[derive(Clone)]
pub struct UserHooks {
    hooks: Arc<Vec<UserHook>>,
    workspace: PathBuf,
    sandbox: SandboxSettings,
    background: tokio_util::task::TaskTracker,
    /// A hook whose input holds a secret does not run.
    leaks: Option<crate::safety::leak::LeakGuard>,
}

impl std::fmt::Debug for UserHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserHooks")
            .field("count", &self.hooks.len())
            .finish()
    }
}

impl UserHooks {
    /// These hooks, run in `workspace` under the sandbox `settings` (the shell's).
    pub fn new(hooks: Vec<UserHook>, workspace: PathBuf, settings: SandboxSettings) -> Self {
        Self {
            hooks: Arc::new(hooks),
            workspace,
            sandbox: settings,
            background: tokio_util::task::TaskTracker::new(),
            leaks: None,
        }
    }

    /// These hooks, none run on an input holding a secret `leaks` watches.
    pub fn with_leaks(mut self, leaks: crate::safety::leak::LeakGuard) -> Self {
        self.leaks = Some(leaks);
        self
    }

    /// True when no hook is configured.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Waits until every notification hook started so far has ended (at
    /// shutdown, and in tests).
    pub async fn settle(&self) {
        self.background.close();
        self.background.wait().await;
        self.background.reopen();
    }

    fn matching<'a>(
        &'a self,
        event: HookEvent,
        name: &'a str,
    ) -> impl Iterator<Item = &'a UserHook> + 'a {
        self.hooks.iter().filter(move |h| {
            h.event == event && h.matcher.as_ref().is_none_or(|m| m.is_match(name))
        })
    }

    /// Starts the notification hooks of `event` matching `name`, without waiting.
    pub fn notify(&self, event: HookEvent, name: &str, mut payload: Value) {
        payload["event"] = json!(event.as_str());
        let payload = scrubbed(&payload);
        for hook in self.matching(event, name) {
            let (this, hook, payload) = (self.clone(), hook.clone(), payload.clone());
            self.background.spawn(async move {
                match this.run(&hook, &payload).await {
                    HookExit::Exited { code: Some(0), .. } => {}
                    other => log_end(&hook, &other),
                }
            });
        }
    }

    /// Runs one hook's command with `payload` on stdin.
    pub async fn run(&self, hook: &UserHook, payload: &Value) -> HookExit {
        if let Some(leaks) = &self.leaks {
            let origin = crate::safety::leak::LeakOrigin::default();
            let place = crate::safety::leak::LeakPlace::Hook;
            let names = leaks.check_json(place, &hook.label, payload, &origin).await;
            if !names.is_empty() {
                return HookExit::NotStarted(crate::safety::leak::blocked_text(
                    &names,
                    "its input",
                ));
            }
        }
        let mut settings = self.sandbox.clone();
        // The files the command names must be readable inside; each gets a
        // rule of its own, as its directory may hold cairn's home.
        let (text, workspace) = (hook.command.clone(), self.workspace.clone());
        let named = tokio::task::spawn_blocking(move || {
            (
                named::in_workspace(&text, &workspace),
                named::files(&text, &workspace),
            )
        })
        .await;
        match named {
            // The agent can write the workspace: what it planted never runs.
            Ok((Some(planted), _)) => {
                return HookExit::NotStarted(format!(
                    "its command names {}, in the workspace, which the agent can write; \
                     keep hook scripts outside the workspace",
                    planted.display()
                ));
            }
            Ok((None, files)) => settings.read_paths.extend(files),
            Err(e) => return HookExit::NotStarted(format!("cannot read its command line: {e}")),
        }
        let mut command = tokio::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(&hook.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut confined = match Sandbox::new(settings).spawn(command, &self.workspace).await {
            Ok(confined) => confined,
            Err(e) => return HookExit::NotStarted(e.to_string()),
        };
        let child = &mut confined.child;
        let _group = GroupKiller(child.id());
        let input = payload.to_string();
        let mut stdin = child.stdin.take();
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let work = async {
            let feed = async {
                if let Some(stdin) = stdin.as_mut() {
                    // A hook that ignores its input closes the pipe early: fine.
                    let _ = stdin.write_all(input.as_bytes()).await;
                }
                drop(stdin.take());
            };
            let ((), out, err, status) = tokio::join!(
                feed,
                read_capped(stdout, MAX_OUTPUT_BYTES),
                read_capped(stderr, MAX_OUTPUT_BYTES),
                child.wait()
            );
            (out, err, status)
        };
        match tokio::time::timeout(hook.timeout, work).await {
            Err(_) => HookExit::TimedOut,
            Ok((out, err, status)) => HookExit::Exited {
                code: status.ok().and_then(|s| s.code()),
                stdout: String::from_utf8_lossy(&out.kept).into_owned(),
                stderr: String::from_utf8_lossy(&err.kept).trim().to_string(),
            },
        }
    }

    /// Starts `hook` once on a sample event of its kind marked
    /// `"dry_run": true` (`cairn doctor`): `Ok` says how it answered when
    /// it ran and answered as its event allows (exit 0, or 2 for a
    /// `before_tool` hook), `Err` why it did not.
    pub async fn dry_run(&self, hook: &UserHook) -> Result<String, String> {
        let mut payload = match hook.event {
            HookEvent::BeforeTool => {
                json!({"tool": "time_now", "call_id": "dry-run", "arguments": {}})
            }
            HookEvent::AfterTool => json!({
                "tool": "time_now", "call_id": "dry-run", "arguments": {},
                "status": "success", "result": "", "duration_ms": 0
            }),
            HookEvent::OnMessage => json!({"channel": "doctor", "text": ""}),
            HookEvent::OnMessageSending => json!({"text": ""}),
            HookEvent::BeforeLlmCall => json!({"model": "doctor", "messages": 0, "tools": []}),
            HookEvent::OnSessionEnd => {
                json!({"user": "doctor", "channel": "doctor", "session_id": "dry-run"})
            }
            HookEvent::OnRoutineRun => {
                json!({"routine": "doctor", "run_id": "dry-run", "status": "ok"})
            }
        };
        payload["event"] = json!(hook.event.as_str());
        payload["dry_run"] = json!(true);
        match self.run(hook, &payload).await {
            HookExit::Exited { code: Some(0), .. } => Ok("ran (exit 0)".to_string()),
            HookExit::Exited {
                code: Some(BLOCK_EXIT_CODE),
                ..
            } if hook.event.blocks() => Ok(format!(
                "ran (exit 2: {})",
                hook.event.blocked().replace(" are ", " would be ")
            )),
            other => Err(failure(hook, &other)),
        }
    }
}

/// Why a hook gave no usable answer, in words for the model and the person.
fn failure(hook: &UserHook, end: &HookExit) -> String {
    let tail = |stderr: &str| {
        let line: String = scrub(stderr.lines().last().unwrap_or_default())
            .chars()
            .take(300)
            .collect();
        if line.is_empty() {
            String::new()
        } else {
            format!(": {line}")
        }
    };
    match end {
        HookExit::NotStarted(why) => format!("it could not start: {why}"),
        HookExit::TimedOut => format!(
            "it ran past its {} timeout and was killed",
            cairn_core::duration::format(hook.timeout)
        ),
        HookExit::Exited {
            code: None, stderr, ..
        } => format!("it was killed by a signal{}", tail(stderr)),
        HookExit::Exited {
            code: Some(code @ (126 | 127)),
            stderr,
            ..
        } => format!(
            "its program could not be run (exit status {code}){}",
            tail(stderr)
        ),
        HookExit::Exited {
            code: Some(code),
            stderr,
            ..
        } => format!("it exited with status {code}{}", tail(stderr)),
    }
}

fn log_end(hook: &UserHook, end: &HookExit) {
    match end {
        HookExit::Exited { code, stderr, .. } => {
            tracing::warn!(hook = %hook.label, ?code, stderr = %scrub(stderr), "hook command failed")
        }
        HookExit::TimedOut => {
            tracing::warn!(hook = %hook.label, timeout = ?hook.timeout, "hook command timed out and was killed")
        }
        HookExit::NotStarted(e) => {
            tracing::warn!(hook = %hook.label, error = %e, "hook command could not start")
        }
    }
}

/// `value` with every string scrubbed of credentials.
fn scrubbed(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(scrub(s).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(scrubbed).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), scrubbed(v))).collect())
        }
        other => other.clone(),
    }
}

#[async_trait]
impl Hook for UserHooks {
    fn name(&self) -> &str {
        "user hooks"
    }

    async fn before_inbound(&self, channel: &str, text: &mut String) -> HookFlow {
        let what = verdict::Stopped {
            noun: "the message",
            verb: "dropped",
        };
        let payload = json!({"channel": channel});
        match self
            .text_hooks(HookEvent::OnMessage, channel, payload, text, &what)
            .await
        {
            Ok(()) => HookFlow::Continue,
            Err(reason) => HookFlow::Cancel(reason),
        }
    }

    async fn before_sending(&self, text: &mut String) -> HookFlow {
        let what = verdict::Stopped {
            noun: "the answer",
            verb: "dropped",
        };
        match self
            .text_hooks(HookEvent::OnMessageSending, "", json!({}), text, &what)
            .await
        {
            Ok(()) => HookFlow::Continue,
            Err(reason) => HookFlow::Cancel(reason),
        }
    }

    fn holds_answers(&self) -> bool {
        self.hooks
            .iter()
            .any(|h| h.event == HookEvent::OnMessageSending)
    }

    async fn before_llm_call(&self, request: &mut ChatRequest) -> HookFlow {
        // `None`: the provider's configured model (null in the event).
        let model = request.model.clone();
        let hooks: Vec<UserHook> = self
            .matching(
                HookEvent::BeforeLlmCall,
                model.as_deref().unwrap_or_default(),
            )
            .cloned()
            .collect();
        if hooks.is_empty() {
            return HookFlow::Continue;
        }
        let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        let payload = scrubbed(&json!({
            "event": "before_llm_call",
            "model": model,
            "messages": request.messages.len(),
            "tools": tools,
        }));
        let what = verdict::Stopped {
            noun: "the model call",
            verb: "blocked",
        };
        for hook in hooks {
            if let verdict::Verdict::Stop(reason) = self.verdict(&hook, &payload, &what).await {
                return HookFlow::Cancel(reason);
            }
        }
        HookFlow::Continue
    }

    async fn before_tool_call(&self, call: &mut ToolCall) -> HookFlow {
        let hooks: Vec<UserHook> = self
            .matching(HookEvent::BeforeTool, &call.name)
            .cloned()
            .collect();
        let what = verdict::Stopped {
            noun: "the call",
            verb: "blocked",
        };
        for hook in hooks {
            let payload = scrubbed(&json!({
                "event": "before_tool",
                "tool": call.name,
                "call_id": call.id,
                "arguments": call.arguments,
            }));
            match self.verdict(&hook, &payload, &what).await {
                // Checked later like the model's own arguments: schema, then the gate.
                verdict::Verdict::Continue(Some(replaced @ Value::Object(_))) => {
                    call.arguments = replaced;
                }
                verdict::Verdict::Continue(_) => {}
                verdict::Verdict::Stop(reason) => return HookFlow::Cancel(reason),
            }
        }
        HookFlow::Continue
    }

    async fn after_tool_call(&self, call: &ToolCall, result: &ToolResult) {
        self.notify(
            HookEvent::AfterTool,
            &call.name,
            json!({
                "tool": result.tool,
                "call_id": call.id,
                "arguments": call.arguments,
                "status": result.status,
                "result": result.content,
                "duration_ms": u64::try_from(result.duration.as_millis()).unwrap_or(u64::MAX),
            }),
        );
    }

    async fn on_session_end(&self, user: &str, channel: &str, session_id: &str) {
        self.notify(
            HookEvent::OnSessionEnd,
            channel,
            json!({"user": user, "channel": channel, "session_id": session_id}),
        );
    }

    async fn on_routine_run(&self, routine: &str, run: &Value) {
        let mut payload = run.clone();
        payload["routine"] = json!(routine);
        self.notify(HookEvent::OnRoutineRun, routine, payload);
    }

    fn watches_routine_runs(&self) -> bool {
        self.hooks
            .iter()
            .any(|h| h.event == HookEvent::OnRoutineRun)
    }
}
