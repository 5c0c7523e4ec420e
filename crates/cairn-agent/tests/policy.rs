//! Policy decisions across autonomy levels, glob rules and session allow-lists.

use cairn_agent::policy::{AutonomyLevel, PolicyDecision, PolicyGate, ToolPolicyConfig};
use cairn_agent::tools::RiskLevel::{self, Dangerous, ReadOnly, Write};

fn gate(autonomy: AutonomyLevel, allow: &[&str], ask: &[&str], deny: &[&str]) -> PolicyGate {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
    PolicyGate::new(&ToolPolicyConfig {
        autonomy,
        allow: v(allow),
        ask: v(ask),
        deny: v(deny),
    })
}

fn short(d: PolicyDecision) -> &'static str {
    match d {
        PolicyDecision::Allow => "allow",
        PolicyDecision::Ask => "ask",
        PolicyDecision::Deny { .. } => "deny",
    }
}

fn decide(g: &PolicyGate, tool: &str, risk: RiskLevel) -> &'static str {
    short(g.decide(tool, risk, "s"))
}

#[test]
fn autonomy_levels_without_rules() {
    let table = [
        (AutonomyLevel::ReadOnly, ["allow", "deny", "deny"]),
        (AutonomyLevel::Supervised, ["allow", "ask", "ask"]),
        (AutonomyLevel::Full, ["allow", "allow", "allow"]),
    ];
    for (autonomy, expected) in table {
        let g = gate(autonomy, &[], &[], &[]);
        for (risk, want) in [ReadOnly, Write, Dangerous].into_iter().zip(expected) {
            assert_eq!(decide(&g, "t", risk), want, "{autonomy:?} {risk:?}");
        }
    }
}

#[test]
fn deny_rules_win_at_every_level() {
    for autonomy in [
        AutonomyLevel::ReadOnly,
        AutonomyLevel::Supervised,
        AutonomyLevel::Full,
    ] {
        let g = gate(autonomy, &["*"], &[], &["file_*"]);
        assert_eq!(decide(&g, "file_read", ReadOnly), "deny");
        assert_eq!(decide(&g, "file_write", Write), "deny");
        match g.decide("file_read", ReadOnly, "s") {
            PolicyDecision::Deny { reason } => assert!(reason.contains("`file_*`"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn allow_rules_skip_asking_but_not_readonly() {
    let g = gate(AutonomyLevel::Supervised, &["file_*"], &[], &[]);
    assert_eq!(decide(&g, "file_write", Write), "allow");
    assert_eq!(decide(&g, "shell", Dangerous), "ask");
    let g = gate(AutonomyLevel::ReadOnly, &["file_*"], &[], &[]);
    assert_eq!(
        decide(&g, "file_write", Write),
        "deny",
        "read-only is a hard cap"
    );
}

#[test]
fn ask_rules_apply_even_in_full_autonomy_and_to_readonly_tools() {
    let g = gate(AutonomyLevel::Full, &[], &["http_*", "list_dir"], &[]);
    assert_eq!(decide(&g, "http_request", Dangerous), "ask");
    assert_eq!(decide(&g, "list_dir", ReadOnly), "ask");
    assert_eq!(decide(&g, "shell", Dangerous), "allow");
}

#[test]
fn exact_names_beat_globs_and_patterns_are_case_insensitive() {
    let g = gate(AutonomyLevel::Supervised, &["File_Read"], &["FILE_*"], &[]);
    assert_eq!(decide(&g, "file_read", ReadOnly), "allow");
    assert_eq!(decide(&g, "file_write", Write), "ask");
    let g = gate(AutonomyLevel::Full, &["shell"], &[], &["*"]);
    assert_eq!(decide(&g, "shell", Dangerous), "allow");
    assert_eq!(decide(&g, "time_now", ReadOnly), "deny");
}

#[test]
fn session_allow_list_is_per_session_and_yields_to_ask_and_deny_rules() {
    let g = gate(AutonomyLevel::Supervised, &[], &["http_request"], &["rm_*"]);
    assert_eq!(decide(&g, "shell", Dangerous), "ask");
    g.allow_for_session("s", "shell");
    g.allow_for_session("s", "http_request");
    g.allow_for_session("s", "rm_all");
    assert_eq!(decide(&g, "shell", Dangerous), "allow");
    assert_eq!(short(g.decide("shell", Dangerous, "other")), "ask");
    assert_eq!(
        decide(&g, "http_request", Dangerous),
        "ask",
        "explicit ask rules always ask"
    );
    assert_eq!(decide(&g, "rm_all", Dangerous), "deny");
    g.forget_session("s");
    assert_eq!(decide(&g, "shell", Dangerous), "ask");
}

#[test]
fn readonly_autonomy_ignores_session_allow_list() {
    let g = gate(AutonomyLevel::ReadOnly, &[], &[], &[]);
    g.allow_for_session("s", "shell");
    assert_eq!(decide(&g, "shell", Dangerous), "deny");
}

#[test]
fn config_deserializes_with_defaults() {
    let config: ToolPolicyConfig =
        serde_json::from_str(r#"{"autonomy": "readonly", "deny": ["shell"]}"#).unwrap();
    assert_eq!(config.autonomy, AutonomyLevel::ReadOnly);
    assert_eq!(config.deny, ["shell"]);
    assert!(config.allow.is_empty());
    let config: ToolPolicyConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(config.autonomy, AutonomyLevel::Supervised);
    assert!(serde_json::from_str::<ToolPolicyConfig>(r#"{"autonomy": "yolo"}"#).is_err());
    assert!(serde_json::from_str::<ToolPolicyConfig>(r#"{"alow": []}"#).is_err());
}
