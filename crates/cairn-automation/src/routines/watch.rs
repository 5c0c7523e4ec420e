//! Watchers' checks: the `watch` action. A watcher is a routine (named
//! `watch-<id>`, interval trigger) whose action calls one tool through the
//! [`ToolRunner`] with no LLM, then lets its strategy decide, from the
//! routine's JSON state, whether the result is worth telling the agent.
//!
//! - A silent check is `ok` with no notification.
//! - An escalation is `attention` with a [`Notice`] titled
//!   `[WATCHER UPDATE] watcher_id=…, label="…", tool=…`, whose body is
//!   `Check #N (interval: Ns, K notification(s) so far, strategy: S)` and a
//!   `Result: …`, `Error: …` or `Summary (N checks): […]` line: the seed's format.
//! - A tool error is never a `failed` run (that would put the routine into
//!   the engine's failure backoff): it is a check that found an error.
//!
//! The state carries `checks`, `notifications`, `last_hash` (on_change),
//! `erroring` (on_error), `expression_error` (on_threshold: an evaluation
//! error is told once, until a check evaluates again) and `batch` (summary).
//! It is stored with the run's end, so counts survive a restart.
//!
//! Each run's summary starts with a line `check #N: ok|error[, notified]`
//! followed by the result text; `watch_history` reads the runs back from it.

use cairn_agent::ToolRunner;
use cairn_agent::runner::{Check, DenyAll, ToolStatus};
use cairn_agent::tools::ToolContext;
use cairn_core::chat::ToolCall;
use cairn_core::routine::{DEFAULT_BATCH_SIZE, Routine, RoutineAction, RunStatus, WatchStrategy};
use cairn_core::schedule::{Rule, Schedule};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::action::{ActionOutcome, ActionRequest, Notice};

/// Prefix of a watcher's routine name (`watch-<watcher_id>`).
pub const ROUTINE_PREFIX: &str = "watch-";
/// Characters of a check's result kept in a notice and in the history.
pub const RESULT_CHARS: usize = 2_000;
/// Characters of one check kept in a summary batch.
const BATCH_ENTRY_CHARS: usize = 500;

/// The routine name of watcher `id`.
pub fn routine_name(id: &str) -> String {
    format!("{ROUTINE_PREFIX}{id}")
}

/// The watcher id of a watcher routine (`None` for other routines).
pub fn watcher_id(routine: &Routine) -> Option<&str> {
    match routine.spec.action {
        RoutineAction::Watch { .. } => routine.spec.name.strip_prefix(ROUTINE_PREFIX),
        _ => None,
    }
}

/// The schedule text of a check every `secs` seconds.
pub fn interval_schedule(secs: u64) -> String {
    format!("every {secs}s")
}

/// A watcher's interval in seconds, read back from its trigger.
pub fn interval_of(routine: &Routine) -> Option<u64> {
    let cairn_core::routine::Trigger::Cron { schedule } = &routine.spec.trigger else {
        return None;
    };
    let parsed = Schedule::parse(schedule, chrono_tz::UTC, chrono::DateTime::UNIX_EPOCH).ok()?;
    match parsed.rule() {
        Rule::Interval { every, .. } => Some(every.as_secs()),
        _ => None,
    }
}

/// The session a watcher's checks run under: the policy is asked for it at
/// `watch_start` and again at each check, so a per-conversation allowance
/// cannot make the two disagree.
pub fn check_session(routine_name: &str) -> String {
    format!("routine:{routine_name}")
}

/// What one check found.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Whether the tool succeeded.
    pub ok: bool,
    /// Its output, or the error.
    pub text: String,
}

/// A watcher's settings, as its strategy needs them.
#[derive(Debug, Clone)]
pub struct WatchSpec<'a> {
    /// The watcher's id.
    pub id: &'a str,
    /// Its label.
    pub label: &'a str,
    /// The watched tool.
    pub tool: &'a str,
    /// Seconds between checks.
    pub interval: u64,
    /// The strategy.
    pub strategy: WatchStrategy,
    /// Its settings.
    pub config: &'a Value,
}

/// What the strategy decided about one check.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The routine's new JSON state.
    pub state: Value,
    /// The check's number (from 1).
    pub check: u64,
    /// The notice to send, when the check is worth one.
    pub notice: Option<Notice>,
}

fn hash(observation: &Observation) -> String {
    let digest = Sha256::digest(format!("{}\n{}", observation.ok, observation.text).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The result as JSON when it is JSON, else as a string.
fn as_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// At most `limit` characters, saying so when cut.
fn cap(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_string()
    } else {
        let kept: String = text.chars().take(limit).collect();
        format!("{kept}… [cut at {limit} characters]")
    }
}

/// Applies the strategy to one check: pure, so every strategy is tested
/// without a clock or a store.
pub fn decide(spec: &WatchSpec<'_>, state: &Value, seen: &Observation) -> Decision {
    let mut st: Map<String, Value> = state.as_object().cloned().unwrap_or_default();
    let n = |st: &Map<String, Value>, k: &str| st.get(k).and_then(Value::as_u64).unwrap_or(0);
    let check = n(&st, "checks") + 1;
    st.insert("checks".into(), json!(check));
    let line = if seen.ok {
        format!("Result: {}", cap(&seen.text, RESULT_CHARS))
    } else {
        format!("Error: {}", cap(&seen.text, RESULT_CHARS))
    };
    let body: Option<String> = match spec.strategy {
        WatchStrategy::Always => Some(line),
        WatchStrategy::OnChange => {
            let h = hash(seen);
            let changed = st.get("last_hash").and_then(Value::as_str) != Some(h.as_str());
            st.insert("last_hash".into(), json!(h));
            changed.then_some(line)
        }
        WatchStrategy::OnError => {
            let was_erroring = flag(&st, "erroring");
            let erroring = !seen.ok;
            st.insert("erroring".into(), json!(erroring));
            // A change of state either way: the first error, or the recovery.
            (was_erroring != erroring).then_some(line)
        }
        WatchStrategy::OnThreshold => on_threshold(spec, &mut st, seen, line),
        WatchStrategy::Summary => summarise(spec, &mut st, seen, check),
    };
    let notice = body.map(|body| {
        let told = n(&st, "notifications") + 1;
        st.insert("notifications".into(), json!(told));
        Notice {
            title: Some(format!(
                "[WATCHER UPDATE] watcher_id={}, label=\"{}\", tool={}",
                spec.id, spec.label, spec.tool
            )),
            body: format!(
                "Check #{check} (interval: {}s, {told} notification(s) so far, strategy: {})\n{body}",
                spec.interval, spec.strategy
            ),
        }
    });
    Decision {
        state: Value::Object(st),
        check,
        notice,
    }
}

/// `on_threshold`: the result line when the expression holds; an error
/// it cannot be evaluated is told once, until a check evaluates again.
fn on_threshold(
    spec: &WatchSpec<'_>,
    st: &mut Map<String, Value>,
    seen: &Observation,
    line: String,
) -> Option<String> {
    let expression = spec
        .config
        .get("expression")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let verdict = if seen.ok {
        cairn_core::threshold::parse(expression)
            .and_then(|e| e.eval(&as_json(&seen.text)))
            .map_err(|e| e.to_string())
    } else {
        Err(format!(
            "the check failed: {}",
            cap(&seen.text, RESULT_CHARS)
        ))
    };
    match verdict {
        Ok(hit) => {
            st.insert("expression_error".into(), json!(false));
            hit.then_some(line)
        }
        Err(error) => {
            let told = flag(st, "expression_error");
            st.insert("expression_error".into(), json!(true));
            (!told).then(|| {
                format!(
                    "Error: cannot evaluate `{expression}` (told once, until a check \
                     evaluates again): {error}"
                )
            })
        }
    }
}

/// `summary`: the check joins the batch; a full batch is told and emptied.
fn summarise(
    spec: &WatchSpec<'_>,
    st: &mut Map<String, Value>,
    seen: &Observation,
    check: u64,
) -> Option<String> {
    let size = spec
        .config
        .get("batch_size")
        .and_then(Value::as_u64)
        .filter(|n| *n >= 1)
        .unwrap_or(DEFAULT_BATCH_SIZE);
    let mut batch = st
        .get("batch")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = cap(&seen.text, BATCH_ENTRY_CHARS);
    batch.push(if seen.ok {
        json!({"check": check, "result": as_json(&text)})
    } else {
        json!({"check": check, "error": text})
    });
    if batch.len() as u64 >= size {
        st.insert("batch".into(), json!([]));
        Some(format!(
            "Summary ({} checks): {}",
            batch.len(),
            Value::Array(batch)
        ))
    } else {
        st.insert("batch".into(), Value::Array(batch));
        None
    }
}

fn flag(st: &Map<String, Value>, key: &str) -> bool {
    st.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// The first line of a check's run summary.
fn summary_head(check: u64, ok: bool, notified: bool) -> String {
    format!(
        "check #{check}: {}{}",
        if ok { "ok" } else { "error" },
        if notified { ", notified" } else { "" }
    )
}

/// One check read back from its run's summary: number, ok, notified, text.
pub fn parse_summary(summary: &str) -> Option<(u64, bool, bool, String)> {
    let (head, rest) = summary.split_once('\n').unwrap_or((summary, ""));
    let head = head.strip_prefix("check #")?;
    let (number, what) = head.split_once(": ")?;
    let check = number.parse().ok()?;
    let ok = what.starts_with("ok");
    let notified = what.ends_with(", notified");
    Some((check, ok, notified, rest.to_string()))
}

/// The runner's output without its `<tool_output …>` frame: the text is
/// already scrubbed and neutralized, and the frame would make every result
/// a string to `on_threshold` and to the summary's JSON.
pub fn unframe(content: &str) -> &str {
    let Some(rest) = content.strip_prefix("<tool_output") else {
        return content;
    };
    let Some((_, body)) = rest.split_once('\n') else {
        return content;
    };
    body.strip_suffix("</tool_output>")
        .map(|b| b.strip_suffix('\n').unwrap_or(b))
        .unwrap_or(body)
}

/// Carries out a watcher's check with `runner` (see the module doc).
pub async fn check(
    runner: &ToolRunner,
    base: &ToolContext,
    request: &ActionRequest,
) -> ActionOutcome {
    let routine = &request.routine;
    let RoutineAction::Watch {
        tool,
        params,
        notify_when,
        notify_config,
        label,
    } = &routine.spec.action
    else {
        return ActionOutcome::failed("not a watcher");
    };
    let id = watcher_id(routine).unwrap_or(&routine.spec.name);
    let session = check_session(&routine.spec.name);
    // Re-checked at each run: a tool that now needs approval or is denied
    // is not run (nobody is there to approve), and the check says why.
    let seen = match runner.check(tool, params, &session) {
        Check::Allowed(_) => {
            let mut ctx = base.clone().with_cancel(request.cancel.clone());
            ctx.session_id = session;
            let call = ToolCall {
                id: request.run_id.to_string(),
                name: tool.clone(),
                arguments: params.clone(),
            };
            let result = runner.run(&call, &ctx, &DenyAll).await;
            let text = unframe(&result.content).to_string();
            Observation {
                ok: result.status == ToolStatus::Success,
                text: match result.status {
                    ToolStatus::Success => text,
                    // The runner writes a tool's own error as `error: …`.
                    ToolStatus::Failed => text.strip_prefix("error: ").unwrap_or(&text).to_string(),
                    status => format!("{}: {text}", status.as_str().replace('_', " ")),
                },
            }
        }
        Check::NeedsApproval(name) => Observation {
            ok: false,
            text: format!("`{name}` now needs approval, and a watcher runs unattended"),
        },
        Check::Denied(name, reason) => Observation {
            ok: false,
            text: format!("`{name}` is denied by policy: {reason}"),
        },
        Check::Unknown(text) => Observation { ok: false, text },
    };
    let spec = WatchSpec {
        id,
        label,
        tool,
        interval: interval_of(routine).unwrap_or(0),
        strategy: *notify_when,
        config: notify_config,
    };
    let decision = decide(&spec, &routine.runtime.state, &seen);
    let notified = decision.notice.is_some();
    let summary = format!(
        "{}\n{}",
        summary_head(decision.check, seen.ok, notified),
        cap(&seen.text, RESULT_CHARS)
    );
    let status = if notified {
        RunStatus::Attention
    } else {
        RunStatus::Ok
    };
    let mut outcome = ActionOutcome::new(status, summary);
    outcome.state = Some(decision.state);
    outcome.notice = decision.notice;
    outcome
}

#[cfg(test)]
mod tests {

    use super::*;

    fn spec(strategy: WatchStrategy, config: &Value) -> WatchSpec<'_> {
        WatchSpec {
            id: "abc123",
            label: "API",
            tool: "http_get",
            interval: 30,
            strategy,
            config,
        }
    }

    #[test]
    fn the_notice_has_the_seed_format() {
        let config = json!({});
        let d = decide(
            &spec(WatchStrategy::Always, &config),
            &json!({"checks": 41, "notifications": 2}),
            &Observation {
                ok: false,
                text: "Connection refused".into(),
            },
        );
        let notice = d.notice.unwrap();
        assert_eq!(
            notice.title.unwrap(),
            "[WATCHER UPDATE] watcher_id=abc123, label=\"API\", tool=http_get"
        );
        assert_eq!(
            notice.body,
            "Check #42 (interval: 30s, 3 notification(s) so far, strategy: always)\nError: Connection refused"
        );
    }

    #[test]
    fn frames_come_off() {
        assert_eq!(
            unframe("<tool_output name=\"x\">\n{\"a\":1}\n</tool_output>"),
            "{\"a\":1}"
        );
        assert_eq!(
            unframe("<tool_output name=\"x\" status=\"failed\">\nboom\n</tool_output>"),
            "boom"
        );
        assert_eq!(unframe("plain"), "plain");
    }

    #[test]
    fn summaries_read_back() {
        let head = summary_head(7, false, true);
        assert_eq!(
            parse_summary(&format!("{head}\nboom")),
            Some((7, false, true, "boom".into()))
        );
        assert_eq!(
            parse_summary("check #3: ok\n{}"),
            Some((3, true, false, "{}".into()))
        );
    }
}
