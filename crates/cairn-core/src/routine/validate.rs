//! Checking a routine spec: every problem is reported with its field path.

use std::fmt;
use std::time::Duration;

use super::EVENT_PATTERN_SIZE_LIMIT;
use super::{RoutineAction, RoutineSpec, Trigger};
use crate::schedule::{self, ScheduleKind};

/// One problem in a spec: the field path (`guardrails.max_concurrent`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// Dotted path of the field.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem found in one spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for ValidationErrors {}

/// Longest name: names become directory names (`routines/{name}/state.md`).
const MAX_NAME_LEN: usize = 64;
/// Largest reply a lightweight routine may ask for.
const MAX_TOKENS: u32 = 200_000;
/// Most rounds a routine's job may take.
const MAX_ITERATIONS: u32 = 500;
/// Most runs of one routine at once.
const MAX_CONCURRENT: u32 = 100;
/// Most missed slots `catch_up: all` may run.
const MAX_CATCH_UP_LIMIT: u32 = 1000;
/// Most runs kept per routine.
const MAX_RETENTION: u32 = 100_000;
/// Longest `jitter` and retry `backoff`: a day.
const MAX_DELAY: Duration = Duration::from_secs(86_400);
/// Most tries `retry.max_attempts` allows.
const MAX_TRIES: u32 = 10;
/// Largest `pause_after_failures`.
const MAX_PAUSE_AFTER: u32 = 1000;

struct Checker {
    errors: Vec<ValidationError>,
}

impl Checker {
    fn fail(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(ValidationError {
            path: path.to_string(),
            message: message.into(),
        });
    }

    fn non_empty(&mut self, path: &str, value: &str) {
        if value.trim().is_empty() {
            self.fail(path, "must not be empty");
        }
    }
}

impl RoutineSpec {
    /// Checks every field; returns all problems, not just the first.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut c = Checker { errors: Vec::new() };
        check_name(&mut c, &self.name);
        check_agent(&mut c, self);
        let zone = self
            .timezone
            .as_deref()
            .and_then(|z| z.parse::<chrono_tz::Tz>().ok())
            .unwrap_or(chrono_tz::UTC);
        check_trigger(&mut c, &self.trigger, zone);
        check_action(&mut c, &self.action);
        check_guardrails(&mut c, self);
        if let Some(channel) = &self.notify.channel {
            c.non_empty("notify.channel", channel);
        }
        if let Some(user) = &self.notify.user {
            c.non_empty("notify.user", user);
        }
        if let Some(zone) = &self.timezone
            && zone.parse::<chrono_tz::Tz>().is_err()
        {
            c.fail(
                "timezone",
                format!(
                    "unknown time zone \"{zone}\"; expected an IANA name such as \"Europe/Paris\""
                ),
            );
        }
        if c.errors.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors(c.errors))
        }
    }
}

fn check_name(c: &mut Checker, name: &str) {
    if name.is_empty() {
        c.fail("name", "must not be empty");
        return;
    }
    if name.len() > MAX_NAME_LEN {
        c.fail("name", format!("must be at most {MAX_NAME_LEN} characters"));
    }
    let first_ok = name
        .chars()
        .next()
        .is_some_and(|ch| ch.is_ascii_alphanumeric());
    let rest_ok = name
        .chars()
        .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'));
    if !first_ok || !rest_ok {
        c.fail(
            "name",
            "must start with a letter or digit and contain only letters, digits, '-', '_' and '.'",
        );
    }
}

/// `agent` written, and not on cairn's own upkeep. Whether it names a
/// configured agent is judged where the configuration is known (the
/// routine service).
fn check_agent(c: &mut Checker, spec: &RoutineSpec) {
    let Some(agent) = &spec.agent else { return };
    if agent.trim().is_empty() {
        c.fail("agent", "must not be empty (leave it out for main)");
    } else if agent != super::MAIN_AGENT && matches!(spec.action, RoutineAction::System { .. }) {
        c.fail(
            "agent",
            format!(
                "`system` actions are cairn's own upkeep and run as {}; leave `agent` out",
                super::MAIN_AGENT
            ),
        );
    }
}

/// Parses a schedule for its syntax only: "now" is a fixed instant, so a
/// one-shot time that is past is caught when the routine is created, not here.
fn check_schedule(c: &mut Checker, path: &str, text: &str, zone: chrono_tz::Tz, want_once: bool) {
    if text.trim().is_empty() {
        c.fail(path, "must not be empty");
        return;
    }
    let reference = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    match (schedule::parse(text, zone, reference), want_once) {
        (Err(e), _) => c.fail(path, e.to_string()),
        (Ok(s), false) if s.kind() == ScheduleKind::Once => {
            c.fail(
                path,
                format!(
                    "\"{text}\" is a single time; use `type: once` with `at:` for one-shot routines"
                ),
            );
        }
        (Ok(s), true) if s.kind() != ScheduleKind::Once => {
            c.fail(
                path,
                format!(
                    "\"{text}\" repeats; use `type: cron` with `schedule:` for recurring routines"
                ),
            );
        }
        (Ok(_), _) => {}
    }
}

fn check_trigger(c: &mut Checker, trigger: &Trigger, zone: chrono_tz::Tz) {
    match trigger {
        Trigger::Cron { schedule } => check_schedule(c, "trigger.schedule", schedule, zone, false),
        Trigger::Once { at } => check_schedule(c, "trigger.at", at, zone, true),
        Trigger::Event { channel, pattern } => {
            if let Some(channel) = channel {
                c.non_empty("trigger.channel", channel);
            }
            if pattern.is_empty() {
                c.fail("trigger.pattern", "must not be empty");
            } else if let Err(err) = regex::RegexBuilder::new(pattern)
                .size_limit(EVENT_PATTERN_SIZE_LIMIT)
                .build()
            {
                let detail = err
                    .to_string()
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                c.fail(
                    "trigger.pattern",
                    format!("invalid regular expression: {detail}"),
                );
            }
        }
        Trigger::SystemEvent { event, .. } => c.non_empty("trigger.event", event),
        Trigger::Webhook { path, secret } => {
            if let Some(path) = path {
                let ok = !path.is_empty()
                    && path
                        .chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'));
                if !ok {
                    c.fail(
                        "trigger.path",
                        "must be non-empty and contain only letters, digits, '-', '_' and '.'",
                    );
                }
            }
            if let Some(secret) = secret {
                c.non_empty("trigger.secret", secret);
            }
        }
        Trigger::Manual => {}
    }
}

fn check_action(c: &mut Checker, action: &RoutineAction) {
    match action {
        RoutineAction::Lightweight {
            prompt,
            context_paths,
            max_tokens,
        } => {
            c.non_empty("action.prompt", prompt);
            for (i, path) in context_paths.iter().enumerate() {
                let field = format!("action.context_paths[{i}]");
                if path.trim().is_empty() {
                    c.fail(&field, "must not be empty");
                } else if path.starts_with('/') || path.split(['/', '\\']).any(|part| part == "..")
                {
                    c.fail(&field, format!("\"{path}\" must be a path inside the workspace (relative, without '..')"));
                }
            }
            if let Some(n) = max_tokens
                && (*n == 0 || *n > MAX_TOKENS)
            {
                c.fail(
                    "action.max_tokens",
                    format!("must be between 1 and {MAX_TOKENS}"),
                );
            }
        }
        RoutineAction::FullJob {
            title,
            description,
            max_iterations,
            allowed_tools,
        } => {
            check_allowed_tools(c, allowed_tools);
            c.non_empty("action.title", title);
            c.non_empty("action.description", description);
            if let Some(n) = max_iterations
                && (*n == 0 || *n > MAX_ITERATIONS)
            {
                c.fail(
                    "action.max_iterations",
                    format!("must be between 1 and {MAX_ITERATIONS}"),
                );
            }
        }
        RoutineAction::ToolCall {
            tool,
            params,
            allowed_tools,
        } => {
            c.non_empty("action.tool", tool);
            check_allowed_tools(c, allowed_tools);
            if !params.is_object() {
                c.fail("action.params", "must be an object of the tool's arguments");
            }
        }
        RoutineAction::Notification { message, title } => {
            c.non_empty("action.message", message);
            if let Some(title) = title {
                c.non_empty("action.title", title);
            }
        }
        RoutineAction::Watch {
            tool,
            params,
            notify_when,
            notify_config,
            ..
        } => check_watch(c, tool, params, *notify_when, notify_config),
        RoutineAction::System { task } => c.non_empty("action.task", task),
    }
}

fn check_watch(
    c: &mut Checker,
    tool: &str,
    params: &serde_json::Value,
    strategy: super::WatchStrategy,
    config: &serde_json::Value,
) {
    c.non_empty("action.tool", tool);
    if !params.is_object() {
        c.fail("action.params", "must be an object of the tool's arguments");
    }
    if !config.is_object() {
        c.fail("action.notify_config", "must be an object");
        return;
    }
    match strategy {
        super::WatchStrategy::OnThreshold => match config.get("expression") {
            Some(serde_json::Value::String(expr)) => {
                if let Err(e) = crate::threshold::parse(expr) {
                    c.fail("action.notify_config.expression", e.to_string());
                }
            }
            _ => c.fail(
                "action.notify_config.expression",
                "on_threshold needs an expression such as `result.status_code != 200`",
            ),
        },
        super::WatchStrategy::Summary => {
            if let Some(n) = config.get("batch_size")
                && !n
                    .as_u64()
                    .is_some_and(|n| (1..=super::MAX_BATCH_SIZE).contains(&n))
            {
                c.fail(
                    "action.notify_config.batch_size",
                    format!("must be a whole number from 1 to {}", super::MAX_BATCH_SIZE),
                );
            }
        }
        _ => {}
    }
}

fn check_allowed_tools(c: &mut Checker, tools: &[String]) {
    for (i, tool) in tools.iter().enumerate() {
        c.non_empty(&format!("action.allowed_tools[{i}]"), tool);
    }
}

fn check_guardrails(c: &mut Checker, spec: &RoutineSpec) {
    let g = &spec.guardrails;
    if g.max_concurrent < 1 {
        c.fail("guardrails.max_concurrent", "must be >= 1");
    } else if g.max_concurrent > MAX_CONCURRENT {
        c.fail(
            "guardrails.max_concurrent",
            format!("must be <= {MAX_CONCURRENT}"),
        );
    }
    if g.dedup_window == Some(Duration::ZERO) {
        c.fail(
            "guardrails.dedup_window",
            "must be longer than 0s (leave it out to disable dedup)",
        );
    }
    if g.timeout == Some(Duration::ZERO) {
        c.fail("guardrails.timeout", "must be longer than 0s");
    }
    if g.catch_up_limit < 1 || g.catch_up_limit > MAX_CATCH_UP_LIMIT {
        c.fail(
            "guardrails.catch_up_limit",
            format!("must be between 1 and {MAX_CATCH_UP_LIMIT}"),
        );
    } else if g.catch_up_limit != super::DEFAULT_CATCH_UP_LIMIT && g.catch_up != super::CatchUp::All
    {
        c.fail(
            "guardrails.catch_up_limit",
            format!(
                "only applies with `catch_up: all`, not `catch_up: {}`",
                g.catch_up.as_str()
            ),
        );
    }
    if g.max_runs == Some(0) {
        c.fail(
            "guardrails.max_runs",
            "must be >= 1 (leave it out for no limit)",
        );
    }
    if g.retention < 1 || g.retention > MAX_RETENTION {
        c.fail(
            "guardrails.retention",
            format!("must be between 1 and {MAX_RETENTION}"),
        );
    }
    check_schedule_ops(c, spec);
    let timed = matches!(spec.trigger, Trigger::Cron { .. } | Trigger::Once { .. });
    if !timed {
        // Only scheduled slots are re-run; say so rather than ignore it.
        if let Some(chosen) = g.on_interrupt {
            c.fail(
                "guardrails.on_interrupt",
                format!(
                    "`on_interrupt: {}` applies to cron and once triggers (their slots are re-run), not {}",
                    chosen.as_str(),
                    spec.trigger.kind()
                ),
            );
        }
        if g.idempotent {
            c.fail(
                "guardrails.idempotent",
                format!(
                    "applies to cron and once triggers (it lets an interrupted slot be re-run), not {}",
                    spec.trigger.kind()
                ),
            );
        }
    }
    if g.dedup_window.is_some()
        && !matches!(
            spec.trigger,
            Trigger::Event { .. } | Trigger::Webhook { .. } | Trigger::SystemEvent { .. }
        )
    {
        c.fail(
            "guardrails.dedup_window",
            format!(
                "applies to event, system_event and webhook triggers, not {}",
                spec.trigger.kind()
            ),
        );
    }
}

/// `overlap`, `jitter`, `pause_after_failures`, `retry`.
fn check_schedule_ops(c: &mut Checker, spec: &RoutineSpec) {
    let g = &spec.guardrails;
    let timed = matches!(spec.trigger, Trigger::Cron { .. } | Trigger::Once { .. });
    if let Some(jitter) = g.jitter {
        if jitter.is_zero() {
            c.fail(
                "guardrails.jitter",
                "must be longer than 0s (leave it out for none)",
            );
        } else if jitter > MAX_DELAY {
            c.fail("guardrails.jitter", "must be at most 1d");
        }
    }
    if !timed {
        // Slots are what these act on; say so rather than ignore them.
        for (field, set) in [
            ("overlap", g.overlap.is_some()),
            ("jitter", g.jitter.is_some()),
        ] {
            if set {
                c.fail(
                    &format!("guardrails.{field}"),
                    format!(
                        "applies to cron and once triggers (their scheduled slots), not {}",
                        spec.trigger.kind()
                    ),
                );
            }
        }
    }
    if let Some(n) = g.pause_after_failures
        && !(1..=MAX_PAUSE_AFTER).contains(&n)
    {
        c.fail(
            "guardrails.pause_after_failures",
            format!("must be between 1 and {MAX_PAUSE_AFTER} (leave it out to never pause)"),
        );
    }
    if let Some(retry) = g.retry {
        if !(1..=MAX_TRIES).contains(&retry.max_attempts) {
            c.fail(
                "guardrails.retry.max_attempts",
                format!("must be between 1 and {MAX_TRIES} (tries in all, the first included)"),
            );
        }
        if retry.backoff.is_zero() || retry.backoff > MAX_DELAY {
            c.fail(
                "guardrails.retry.backoff",
                "must be longer than 0s and at most 1d",
            );
        }
    }
}
