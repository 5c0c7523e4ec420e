//! Turning a [`RoutineSpec`] into what the store keeps: every check a spec
//! must pass before it is written (field validation, the schedule, a one-shot
//! not in the past, the event pattern as the matcher compiles it, `shell` in
//! `allowed_tools` where commands cannot be confined) and its first slot. No
//! I/O, the instant is passed in, so `cairn routine apply`, the API, the
//! agent's routine tools and tests all judge a spec the same way; the one
//! fact of the host it reads is whether its sandbox confines commands
//! ([`cairn_agent::sandbox::host`], set once at start-up).

use std::fmt;

use cairn_core::routine::{RoutineSpec, Trigger};
use cairn_core::schedule::Schedule;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::event_matcher::validate_pattern;

/// One problem in a spec: the field path (`trigger.schedule`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted path of the field.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The zone a routine's schedule is read in: its own, else the user's.
pub fn zone_of(spec: &RoutineSpec, user_zone: Tz) -> Tz {
    spec.timezone
        .as_deref()
        .and_then(|z| z.parse().ok())
        .unwrap_or(user_zone)
}

/// The parsed schedule of a cron or once trigger, relative to `now`
/// (`None` for triggers without one).
pub fn schedule_of(
    spec: &RoutineSpec,
    user_zone: Tz,
    now: DateTime<Utc>,
) -> Option<Result<Schedule, String>> {
    let text = match &spec.trigger {
        Trigger::Cron { schedule } => schedule,
        Trigger::Once { at } => at,
        _ => return None,
    };
    Some(Schedule::parse(text, zone_of(spec, user_zone), now).map_err(|e| e.to_string()))
}

/// The schedule of a cron trigger `text`, read again at one of its slots
/// so that the slot stays on its grid: an interval counts from the slot; a
/// day step (`every 2 days at 9am`) starts on the slot's own day, which
/// reading it at the slot itself would skip (the slot's time is not ahead
/// of itself), making it fire every day from its second fire on.
pub fn schedule_at_slot(
    text: &str,
    zone: Tz,
    slot: DateTime<Utc>,
) -> Result<Schedule, cairn_core::schedule::ScheduleError> {
    let schedule = Schedule::parse(text, zone, slot)?;
    match schedule.rule() {
        cairn_core::schedule::Rule::EveryDays { .. } => {
            Schedule::parse(text, zone, slot - chrono::Duration::seconds(1))
        }
        _ => Ok(schedule),
    }
}

/// Checks `spec` as of `now` and computes its next slot (`None` for triggers
/// that are not timed, or a recurring schedule with no future slot).
///
/// Field problems are all reported together; the schedule and the pattern
/// are only judged once the fields are valid, because a field problem (an
/// unknown zone, say) would make their verdict misleading.
pub fn prepare(
    spec: &RoutineSpec,
    user_zone: Tz,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, Vec<Problem>> {
    let mut problems: Vec<Problem> = match spec.validate() {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .0
            .into_iter()
            .map(|e| Problem {
                path: e.path,
                message: e.message,
            })
            .collect(),
    };
    // The matcher's own compile is the judge of a pattern (it is what will
    // run), and its message quotes the pattern, so it replaces the field
    // check's word on `trigger.pattern`.
    if let Trigger::Event { pattern, .. } = &spec.trigger
        && let Err(err) = validate_pattern(&spec.name, pattern)
    {
        problems.retain(|p| p.path != "trigger.pattern");
        problems.push(Problem {
            path: "trigger.pattern".to_string(),
            message: format!("event pattern `{}`: {}", err.pattern, err.problem),
        });
    }
    problems.extend(unconfined_shell(spec));
    if !problems.is_empty() {
        return Err(problems);
    }
    let field = match spec.trigger {
        Trigger::Once { .. } => "trigger.at",
        _ => "trigger.schedule",
    };
    match schedule_of(spec, user_zone, now) {
        None => Ok(None),
        Some(Err(message)) => Err(vec![Problem {
            path: field.to_string(),
            message,
        }]),
        Some(Ok(schedule)) => match schedule.next_after(now) {
            Some(next) => Ok(Some(next)),
            None if matches!(spec.trigger, Trigger::Once { .. }) => Err(vec![Problem {
                path: field.to_string(),
                message: "the time is already past".to_string(),
            }]),
            None => Ok(None),
        },
    }
}

/// A problem when `spec` names an agent that is not among `known` (the
/// ids of `[[agents]]`, `main` first): a routine runs as its agent or not
/// at all, never as another.
pub fn unknown_agent(spec: &RoutineSpec, known: &[String]) -> Option<Problem> {
    let agent = spec.agent.as_deref()?;
    not_configured(agent, known).map(|message| Problem {
        path: "agent".to_string(),
        message,
    })
}

/// Why `agent` is not one of `known`, naming the closest and every one;
/// `None` when it is (or is blank, which the field check reports).
pub fn not_configured(agent: &str, known: &[String]) -> Option<String> {
    if agent.trim().is_empty() || known.iter().any(|k| k == agent) {
        return None;
    }
    let hint = cairn_core::text::closest(agent, known.iter().map(String::as_str))
        .map(|s| format!("did you mean \"{s}\"? "))
        .unwrap_or_default();
    Some(format!(
        "no agent \"{agent}\" in [[agents]]; {hint}(configured: {})",
        known.join(", ")
    ))
}

/// A problem when the action's `allowed_tools` lets a tool that starts
/// processes (`shell`) run unapproved and this host's sandbox cannot confine
/// it, unless the owner allowed unconfined runs. Checked when a routine is
/// defined and again when it runs (the host may have changed since).
pub fn unconfined_shell(spec: &RoutineSpec) -> Option<Problem> {
    let tool = cairn_agent::sandbox::first_process_tool(spec.action.allowed_tools())?;
    let message = match cairn_agent::sandbox::host() {
        Ok(host) => host.unattended_refusal(&format!("allowed_tools listing `{tool}`"))?,
        // Refused: whether `shell` could be confined is unknown.
        Err(e) => e.to_string(),
    };
    Some(Problem {
        path: "action.allowed_tools".to_string(),
        message,
    })
}

#[cfg(test)]
mod tests {

    use super::*;
    use chrono::TimeZone;

    fn spec(yaml: &str) -> RoutineSpec {
        RoutineSpec::parse(yaml, cairn_core::routine::SpecFormat::Yaml).unwrap()
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()
    }

    #[test]
    fn cron_gets_its_next_slot_in_its_zone() {
        let s = spec(
            "name: a\ntimezone: Europe/Paris\ntrigger: {type: cron, schedule: \"0 9 * * *\"}\n\
             action: {type: notification, message: hi}\n",
        );
        let next = prepare(&s, Tz::UTC, now()).unwrap();
        assert_eq!(
            next,
            Some(Utc.with_ymd_and_hms(2026, 3, 2, 8, 0, 0).unwrap())
        );
    }

    #[test]
    fn one_shot_in_the_past_is_a_problem_at_trigger_at() {
        let s = spec(
            "name: a\ntrigger: {type: once, at: \"2020-01-01T00:00:00Z\"}\n\
             action: {type: notification, message: hi}\n",
        );
        let problems = prepare(&s, Tz::UTC, now()).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].path, "trigger.at");
    }

    #[test]
    fn bad_schedule_names_the_field() {
        let s = spec(
            "name: a\ntrigger: {type: cron, schedule: \"0 9 * * mon-fry\"}\n\
             action: {type: notification, message: hi}\n",
        );
        let problems = prepare(&s, Tz::UTC, now()).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].path, "trigger.schedule");
    }

    #[test]
    fn a_bad_pattern_is_quoted() {
        let s = spec(
            "name: a\ntrigger: {type: event, pattern: \"deploy(\"}\n\
             action: {type: notification, message: hi}\n",
        );
        let problems = prepare(&s, Tz::UTC, now()).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "trigger.pattern");
        assert!(
            problems[0]
                .message
                .starts_with("event pattern `deploy(`: invalid regular expression: "),
            "{}",
            problems[0].message
        );
    }

    #[test]
    fn event_triggers_have_no_slot() {
        let s = spec(
            "name: a\ntrigger: {type: event, pattern: \"deploy\\\\s+\\\\w+\"}\n\
             action: {type: notification, message: hi}\n",
        );
        assert_eq!(prepare(&s, Tz::UTC, now()), Ok(None));
    }
}
