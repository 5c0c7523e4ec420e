//! Routine specs: the seed's example files parse, validate and round-trip; bad specs say what and where.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

use cairn_core::routine::{
    CatchUp, OnInterrupt, Overlap, Retry, RoutineAction, RoutineSpec, SpecFormat, Trigger, line_of,
};
use std::time::Duration;

const EXAMPLES: [(&str, &str); 3] = [
    (
        "daily-pr-summary",
        include_str!("fixtures/routines/daily-pr-summary.yaml"),
    ),
    (
        "deploy-webhook",
        include_str!("fixtures/routines/deploy-webhook.yaml"),
    ),
    (
        "security-alerts",
        include_str!("fixtures/routines/security-alerts.yaml"),
    ),
];

#[test]
fn seed_examples_parse_validate_and_round_trip() {
    for (name, yaml) in EXAMPLES {
        let spec =
            RoutineSpec::parse(yaml, SpecFormat::Yaml).unwrap_or_else(|e| panic!("{name}: {e}"));
        spec.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(spec.name, name);

        // YAML -> JSON -> spec is lossless.
        let json = serde_json::to_string_pretty(&spec).unwrap();
        let back = RoutineSpec::parse(&json, SpecFormat::Json).unwrap();
        assert_eq!(back, spec, "{name}");

        // The JSON has the seed's own shape: exactly the document the YAML describes.
        let as_written: serde_json::Value = serde_norway::from_str(yaml).unwrap();
        assert_eq!(serde_json::to_value(&spec).unwrap(), as_written, "{name}");

        // And back out to YAML without change.
        let again = RoutineSpec::parse(&spec.to_yaml().unwrap(), SpecFormat::Yaml).unwrap();
        assert_eq!(again, spec, "{name}");
    }
}

#[test]
fn seed_examples_mean_what_they_say() {
    let pr = RoutineSpec::parse(EXAMPLES[0].1, SpecFormat::Yaml).unwrap();
    assert_eq!(
        pr.trigger,
        Trigger::Cron {
            schedule: "0 9 * * MON-FRI".into()
        }
    );
    assert_eq!(pr.guardrails.cooldown, Duration::from_secs(3600));
    assert!(matches!(
        pr.action,
        RoutineAction::Lightweight {
            max_tokens: Some(4096),
            ..
        }
    ));

    let deploy = RoutineSpec::parse(EXAMPLES[1].1, SpecFormat::Yaml).unwrap();
    assert_eq!(
        deploy.trigger,
        Trigger::Webhook {
            path: None,
            secret: Some("${DEPLOY_SECRET}".into())
        }
    );
    assert!(deploy.notify.on_success);

    let sec = RoutineSpec::parse(EXAMPLES[2].1, SpecFormat::Yaml).unwrap();
    assert_eq!(sec.guardrails.dedup_window, Some(Duration::from_secs(3600)));
    assert_eq!(sec.guardrails.max_concurrent, 3);
}

#[test]
fn minimal_spec_gets_defaults() {
    let spec = RoutineSpec::parse(
        "name: ping\ntrigger: {type: manual}\naction: {type: notification, message: hi}\n",
        SpecFormat::Yaml,
    )
    .unwrap();
    spec.validate().unwrap();
    assert!(spec.enabled);
    assert_eq!(spec.guardrails.cooldown, Duration::from_secs(300));
    assert_eq!(spec.guardrails.max_concurrent, 1);
    assert!(spec.notify.on_attention && spec.notify.on_failure && !spec.notify.on_success);
}

#[test]
fn validation_reports_every_problem_with_its_path() {
    let yaml = r#"
name: "bad name!"
trigger:
  type: event
  pattern: "(unclosed"
action:
  type: lightweight
  prompt: ""
  context_paths: ["../secrets.md", "/etc/passwd"]
  max_tokens: 0
guardrails:
  cooldown: 10s
  max_concurrent: 0
  dedup_window: 0s
timezone: Mars/Olympus
"#;
    let spec = RoutineSpec::parse(yaml, SpecFormat::Yaml).unwrap();
    let errs = spec.validate().unwrap_err();
    let paths: Vec<&str> = errs.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "name",
            "trigger.pattern",
            "action.prompt",
            "action.context_paths[0]",
            "action.context_paths[1]",
            "action.max_tokens",
            "guardrails.max_concurrent",
            "guardrails.dedup_window",
            "timezone",
        ]
    );
    assert!(
        errs.to_string()
            .contains("guardrails.max_concurrent: must be >= 1"),
        "{errs}"
    );
}

#[test]
fn shape_errors_name_the_field_and_line() {
    let err = RoutineSpec::parse(
        "name: x\ntrigger: {type: manual}\naction: {type: notification, message: hi}\nguardrails:\n  colldown: 5s\n",
        SpecFormat::Yaml,
    )
    .unwrap_err();
    assert_eq!(err.line, Some(5), "{err}");
    assert!(err.message.contains("colldown"), "{err}");

    let err = RoutineSpec::parse(
        "name: x\ntrigger: {type: hourly}\naction: {type: notification, message: hi}\n",
        SpecFormat::Yaml,
    )
    .unwrap_err();
    assert!(err.message.contains("hourly"), "{err}");

    let err = RoutineSpec::parse(
        "name: x\ntrigger: {type: manual}\naction: {type: notification, message: hi}\nguardrails: {cooldown: 5 blorps}\n",
        SpecFormat::Yaml,
    )
    .unwrap_err();
    assert!(err.message.contains("blorps"), "{err}");

    let err =
        RoutineSpec::parse("{\"name\": \"x\",\n \"trigger\": 3}", SpecFormat::Json).unwrap_err();
    assert_eq!(err.line, Some(2), "{err}");
}

#[test]
fn unknown_fields_inside_trigger_and_action_are_rejected() {
    let err = RoutineSpec::parse(
        "name: x\ntrigger: {type: cron, schedule: '0 9 * * *', timezon: UTC}\naction: {type: notification, message: hi}\n",
        SpecFormat::Yaml,
    )
    .unwrap_err();
    assert!(err.message.contains("timezon"), "{err}");
    let err = RoutineSpec::parse(
        "name: x\ntrigger: {type: manual}\naction: {type: notification, mesage: hi}\n",
        SpecFormat::Yaml,
    )
    .unwrap_err();
    assert!(err.message.contains("mesage"), "{err}");
}

#[test]
fn schedules_are_checked_with_their_field_path() {
    let spec = |trigger: &str| {
        RoutineSpec::parse(
            &format!("name: x\ntrigger: {trigger}\naction: {{type: notification, message: hi}}\n"),
            SpecFormat::Yaml,
        )
        .unwrap()
    };
    assert!(
        spec("{type: cron, schedule: 'every weekday at 9am'}")
            .validate()
            .is_ok()
    );
    assert!(
        spec("{type: cron, schedule: 'every 2h'}")
            .validate()
            .is_ok()
    );
    assert!(spec("{type: once, at: 'in 20m'}").validate().is_ok());

    let err = spec("{type: cron, schedule: '0 25 * * *'}")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("trigger.schedule: ") && err.contains("25"),
        "{err}"
    );
    let err = spec("{type: cron, schedule: 'every 5 blorps'}")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("blorps"), "{err}");
    let err = spec("{type: cron, schedule: 'in 20m'}")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("type: once"), "{err}");
    let err = spec("{type: once, at: 'every day at 9am'}")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("trigger.at: ") && err.contains("type: cron"),
        "{err}"
    );
}

#[test]
fn oversized_event_patterns_are_refused_at_validation() {
    let spec = |pattern: &str| {
        RoutineSpec::parse(
            &format!(
                "name: x\ntrigger: {{type: event, pattern: '{pattern}'}}\naction: {{type: notification, message: hi}}\n"
            ),
            SpecFormat::Yaml,
        )
        .unwrap()
    };
    assert!(spec("deploy\\s+\\w+").validate().is_ok());
    let err = spec("(a{1000}){1000}").validate().unwrap_err().to_string();
    assert!(
        err.starts_with("trigger.pattern: invalid regular expression:")
            && err.contains("size limit"),
        "{err}"
    );
}

fn with_guardrails(guardrails: &str) -> RoutineSpec {
    RoutineSpec::parse(
        &format!(
            "name: x\ntrigger: {{type: cron, schedule: '0 9 * * *'}}\naction: {{type: notification, message: hi}}\nguardrails: {guardrails}\n"
        ),
        SpecFormat::Yaml,
    )
    .unwrap()
}

#[test]
fn catch_up_max_runs_and_retention_have_defaults_and_round_trip() {
    let spec = with_guardrails("{}");
    assert_eq!(spec.guardrails.catch_up, CatchUp::Once);
    assert_eq!(spec.guardrails.catch_up_limit, 10);
    assert_eq!(spec.guardrails.max_runs, None);
    assert_eq!(spec.guardrails.retention, 200);
    // Defaults are not written back out, so a file round-trips as written.
    assert!(!spec.to_yaml().unwrap().contains("retention"));

    let spec = with_guardrails("{catch_up: all, catch_up_limit: 3, max_runs: 5, retention: 20}");
    spec.validate().unwrap();
    assert_eq!(spec.guardrails.catch_up, CatchUp::All);
    assert_eq!(
        (
            spec.guardrails.catch_up_limit,
            spec.guardrails.max_runs,
            spec.guardrails.retention
        ),
        (3, Some(5), 20)
    );
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(RoutineSpec::parse(&json, SpecFormat::Json).unwrap(), spec);
    let yaml = spec.to_yaml().unwrap();
    assert_eq!(RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap(), spec);
    assert_eq!(
        with_guardrails("{catch_up: skip}").guardrails.catch_up,
        CatchUp::Skip
    );
}

#[test]
fn catch_up_max_runs_and_retention_are_checked() {
    let err = RoutineSpec::parse(
        "name: x\ntrigger: {type: manual}\naction: {type: notification, message: hi}\nguardrails: {catch_up: sometimes}\n",
        SpecFormat::Yaml,
    )
    .unwrap_err();
    assert!(err.message.contains("sometimes"), "{err}");

    let errs = with_guardrails("{catch_up_limit: 0, max_runs: 0, retention: 0}")
        .validate()
        .unwrap_err();
    let paths: Vec<&str> = errs.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "guardrails.catch_up_limit",
            "guardrails.max_runs",
            "guardrails.retention"
        ],
        "{errs}"
    );
    let err = with_guardrails("{catch_up: skip, catch_up_limit: 5}")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("catch_up: all"), "{err}");
}

#[test]
fn an_unknown_zone_names_the_field_and_the_value() {
    let spec = RoutineSpec::parse(
        "name: x\ntimezone: Europe/Pariss\ntrigger: {type: manual}\naction: {type: notification, message: hi}\n",
        SpecFormat::Yaml,
    )
    .unwrap();
    let err = spec.validate().unwrap_err().to_string();
    assert!(
        err.starts_with("timezone: ") && err.contains("\"Europe/Pariss\""),
        "{err}"
    );
}

fn with_action(action: &str, guardrails: &str) -> RoutineSpec {
    RoutineSpec::parse(
        &format!(
            "name: x\ntrigger: {{type: cron, schedule: '0 9 * * *'}}\naction: {action}\nguardrails: {guardrails}\n"
        ),
        SpecFormat::Yaml,
    )
    .unwrap()
}

#[test]
fn on_interrupt_defaults_by_action_and_round_trips() {
    let cases = [
        ("{type: notification, message: hi}", OnInterrupt::Rerun),
        ("{type: lightweight, prompt: check}", OnInterrupt::Rerun),
        ("{type: system, task: heartbeat}", OnInterrupt::Rerun),
        ("{type: tool_call, tool: shell}", OnInterrupt::Skip),
        (
            "{type: full_job, title: t, description: d}",
            OnInterrupt::Skip,
        ),
        ("{type: watch, tool: http_request}", OnInterrupt::Skip),
    ];
    for (action, expected) in cases {
        let spec = with_action(action, "{}");
        spec.validate().unwrap();
        assert_eq!(spec.on_interrupt(), expected, "{action}");
        // Defaults are not written back out.
        let yaml = spec.to_yaml().unwrap();
        assert!(
            !yaml.contains("on_interrupt") && !yaml.contains("idempotent"),
            "{yaml}"
        );
    }
    let spec = with_action("{type: tool_call, tool: shell}", "{idempotent: true}");
    spec.validate().unwrap();
    assert_eq!(spec.on_interrupt(), OnInterrupt::Rerun);
    let spec = with_action("{type: notification, message: hi}", "{on_interrupt: skip}");
    assert_eq!(spec.on_interrupt(), OnInterrupt::Skip);
    let spec = with_action(
        "{type: full_job, title: t, description: d}",
        "{on_interrupt: rerun, idempotent: true}",
    );
    assert_eq!(spec.on_interrupt(), OnInterrupt::Rerun);
    let yaml = spec.to_yaml().unwrap();
    assert_eq!(RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap(), spec);
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(RoutineSpec::parse(&json, SpecFormat::Json).unwrap(), spec);
}

#[test]
fn on_interrupt_is_checked_with_its_field_and_line() {
    let text = "name: x\ntrigger: {type: cron, schedule: '0 9 * * *'}\naction: {type: notification, message: hi}\nguardrails:\n  on_interrupt: sometimes\n";
    let err = RoutineSpec::parse(text, SpecFormat::Yaml).unwrap_err();
    assert!(
        err.message.contains("sometimes") && err.line == Some(5),
        "{err}"
    );
    let text = "name: x\ntrigger: {type: webhook}\naction: {type: notification, message: hi}\nguardrails:\n  cooldown: 0s\n  on_interrupt: rerun\n  idempotent: true\n";
    let spec = RoutineSpec::parse(text, SpecFormat::Yaml).unwrap();
    let errs = spec.validate().unwrap_err();
    let found: Vec<(&str, Option<usize>)> = errs
        .0
        .iter()
        .map(|e| (e.path.as_str(), line_of(text, SpecFormat::Yaml, &e.path)))
        .collect();
    assert_eq!(
        found,
        [
            ("guardrails.on_interrupt", Some(6)),
            ("guardrails.idempotent", Some(7))
        ],
        "{errs}"
    );
    assert!(errs.to_string().contains("not webhook"), "{errs}");
}

#[test]
fn schedule_operations_parse_default_and_round_trip() {
    let spec = with_action("{type: notification, message: hi}", "{}");
    assert_eq!(spec.overlap(), Overlap::Skip);
    let yaml = spec.to_yaml().unwrap();
    for field in ["overlap", "jitter", "pause_after_failures", "retry"] {
        assert!(!yaml.contains(field), "{yaml}");
    }
    // Several runs allowed at once, as written before `overlap` existed.
    let spec = with_action("{type: notification, message: hi}", "{max_concurrent: 3}");
    assert_eq!(spec.overlap(), Overlap::AllowAll);
    let spec = with_action(
        "{type: notification, message: hi}",
        "{overlap: buffer_one, jitter: 30s, pause_after_failures: 3, retry: {max_attempts: 3, backoff: 30s}}",
    );
    spec.validate().unwrap();
    let g = &spec.guardrails;
    assert_eq!(spec.overlap(), Overlap::BufferOne);
    assert_eq!(g.jitter, Some(Duration::from_secs(30)));
    assert_eq!(g.pause_after_failures, Some(3));
    let retry = g.retry.unwrap();
    assert_eq!(
        retry,
        Retry {
            max_attempts: 3,
            backoff: Duration::from_secs(30)
        }
    );
    assert_eq!(retry.wait_before(2), Duration::from_secs(30));
    assert_eq!(retry.wait_before(3), Duration::from_secs(60));
    let yaml = spec.to_yaml().unwrap();
    assert_eq!(RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap(), spec);
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(RoutineSpec::parse(&json, SpecFormat::Json).unwrap(), spec);
    // `backoff` defaults to 30s.
    let spec = with_action(
        "{type: notification, message: hi}",
        "{retry: {max_attempts: 2}}",
    );
    assert_eq!(
        spec.guardrails.retry.unwrap().backoff,
        Duration::from_secs(30)
    );
}

#[test]
fn schedule_operations_are_checked_with_their_fields() {
    let text = "name: x\ntrigger: {type: cron, schedule: '0 9 * * *'}\naction: {type: notification, message: hi}\nguardrails:\n  overlap: sometimes\n";
    let err = RoutineSpec::parse(text, SpecFormat::Yaml).unwrap_err();
    assert!(
        err.message.contains("sometimes") && err.line == Some(5),
        "{err}"
    );
    let spec = with_action(
        "{type: notification, message: hi}",
        "{jitter: 0s, pause_after_failures: 0, retry: {max_attempts: 11, backoff: 0s}}",
    );
    let errs = spec.validate().unwrap_err();
    let paths: Vec<&str> = errs.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "guardrails.jitter",
            "guardrails.pause_after_failures",
            "guardrails.retry.max_attempts",
            "guardrails.retry.backoff"
        ],
        "{errs}"
    );
    let text = "name: x\ntrigger: {type: webhook}\naction: {type: notification, message: hi}\nguardrails:\n  overlap: skip\n  jitter: 10s\n";
    let errs = RoutineSpec::parse(text, SpecFormat::Yaml)
        .unwrap()
        .validate()
        .unwrap_err();
    let found: Vec<(&str, Option<usize>)> = errs
        .0
        .iter()
        .map(|e| (e.path.as_str(), line_of(text, SpecFormat::Yaml, &e.path)))
        .collect();
    assert_eq!(
        found,
        [
            ("guardrails.overlap", Some(5)),
            ("guardrails.jitter", Some(6))
        ],
        "{errs}"
    );
}

fn with_agent(agent: &str, action: &str) -> RoutineSpec {
    RoutineSpec::parse(
        &format!("name: x\n{agent}trigger: {{type: manual}}\naction: {action}\n"),
        SpecFormat::Yaml,
    )
    .unwrap()
}

#[test]
fn agent_is_main_when_absent_and_round_trips_when_written() {
    let spec = with_agent("", "{type: notification, message: hi}");
    assert_eq!(spec.agent, None);
    assert_eq!(spec.agent_id(), "main");
    assert!(!spec.to_yaml().unwrap().contains("agent"));

    let yaml = "name: x\nagent: family\ntrigger: {type: manual}\naction: {type: notification, message: hi}\n";
    let spec = RoutineSpec::parse(yaml, SpecFormat::Yaml).unwrap();
    spec.validate().unwrap();
    assert_eq!(spec.agent.as_deref(), Some("family"));
    assert_eq!(spec.agent_id(), "family");
    let again = RoutineSpec::parse(&spec.to_yaml().unwrap(), SpecFormat::Yaml).unwrap();
    assert_eq!(again, spec);
    let json = serde_json::to_value(&spec).unwrap();
    assert_eq!(json["agent"], "family");
    // Its line, for errors the configuration finds later.
    assert_eq!(line_of(yaml, SpecFormat::Yaml, "agent"), Some(2));
}

#[test]
fn agent_must_be_written_and_never_on_cairns_own_upkeep() {
    let errors = |spec: RoutineSpec| -> Vec<String> {
        spec.validate()
            .err()
            .map(|e| e.0.iter().map(ToString::to_string).collect())
            .unwrap_or_default()
    };
    assert_eq!(
        errors(with_agent(
            "agent: ' '\n",
            "{type: notification, message: hi}"
        )),
        ["agent: must not be empty (leave it out for main)"]
    );
    assert_eq!(
        errors(with_agent(
            "agent: family\n",
            "{type: system, task: heartbeat}"
        )),
        ["agent: `system` actions are cairn's own upkeep and run as main; leave `agent` out"]
    );
    // `agent: main` is main, whatever the action.
    assert!(
        errors(with_agent(
            "agent: main\n",
            "{type: system, task: heartbeat}"
        ))
        .is_empty()
    );
    // Its type is checked as the file is read, naming the field.
    let err = RoutineSpec::parse(
        "name: x\nagent: [a]\ntrigger: {type: manual}\naction: {type: notification, message: hi}\n",
        SpecFormat::Yaml,
    )
    .unwrap_err();
    assert!(err.message.starts_with("agent: "), "{err}");
}
