//! The built-in registry: names, aliases, definitions, and end-to-end runs through the runner.
#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod support;

use std::sync::Arc;

use cairn_agent::policy::{AutonomyLevel, PolicyGate, ToolPolicyConfig};
use cairn_agent::runner::{AutoApprove, DenyAll, ToolRunner, ToolStatus};
use cairn_agent::tools::{RiskLevel, ToolContext, ToolsConfig, builtin_registry};
use serde_json::json;
use support::call;

#[test]
fn registers_every_builtin_with_definitions() {
    let registry = builtin_registry(&ToolsConfig::default()).unwrap();
    assert_eq!(
        registry.names(),
        [
            "file_read",
            "file_write",
            "http_request",
            "list_dir",
            "shell",
            "time_now",
            "web_fetch"
        ]
    );
    let definitions = registry.definitions();
    assert_eq!(definitions.len(), 7);
    for d in &definitions {
        assert!(!d.description.is_empty(), "{}", d.name);
        assert_eq!(d.parameters["type"], "object", "{}", d.name);
    }
    let risk = |n: &str| registry.get(n).unwrap().spec().risk();
    assert_eq!(risk("file_read"), RiskLevel::ReadOnly);
    assert_eq!(risk("list_dir"), RiskLevel::ReadOnly);
    assert_eq!(risk("time_now"), RiskLevel::ReadOnly);
    assert_eq!(risk("file_write"), RiskLevel::Write);
    assert_eq!(risk("shell"), RiskLevel::Dangerous);
    assert_eq!(risk("http_request"), RiskLevel::Dangerous);
    // A GET under the same network rules, its answer made readable.
    assert_eq!(risk("web_fetch"), RiskLevel::ReadOnly);
}

#[test]
fn aliases_resolve_case_insensitively() {
    let registry = builtin_registry(&ToolsConfig::default()).unwrap();
    let cases = [
        ("bash", "shell"),
        ("SH", "shell"),
        ("Exec", "shell"),
        ("fileread", "file_read"),
        ("read_file", "file_read"),
        ("ReadFile", "file_read"),
        ("read-file", "file_read"),
        ("filewrite", "file_write"),
        ("write_file", "file_write"),
        ("ls", "list_dir"),
        ("listdir", "list_dir"),
        ("http", "http_request"),
        ("fetch", "http_request"),
        ("now", "time_now"),
        ("FILE_READ", "file_read"),
    ];
    for (alias, canonical) in cases {
        assert_eq!(registry.resolve(alias), Some(canonical), "{alias}");
        assert_eq!(registry.get(alias).unwrap().spec().name(), canonical);
    }
    assert!(registry.get("telnet").is_none());
}

#[test]
fn config_deserializes_with_defaults_and_rejects_typos() {
    let config: ToolsConfig = serde_json::from_str(
        r#"{"shell": {"allowed_programs": ["ls"], "timeout": "30s"}, "http": {"max_response_bytes": 10}}"#,
    )
    .unwrap();
    assert_eq!(config.shell.allowed_programs, ["ls"]);
    assert_eq!(config.shell.timeout, std::time::Duration::from_secs(30));
    assert!(!config.shell.allow_shell_syntax);
    assert_eq!(config.http.max_response_bytes, 10);
    assert!(config.http.block_private_networks);
    assert!(serde_json::from_str::<ToolsConfig>(r#"{"shell": {"alowed_programs": []}}"#).is_err());
}

fn runner(autonomy: AutonomyLevel) -> ToolRunner {
    let registry = builtin_registry(&ToolsConfig::default()).unwrap();
    let policy = PolicyGate::new(&ToolPolicyConfig {
        autonomy,
        ..ToolPolicyConfig::default()
    });
    ToolRunner::new(Arc::new(registry), Arc::new(policy))
}

#[tokio::test]
async fn supervised_read_runs_and_write_asks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "password=hunter2\n").unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let r = runner(AutonomyLevel::Supervised);
    let result = r
        .run(&call("readfile", json!({"path": "a.txt"})), &ctx, &DenyAll)
        .await;
    assert_eq!(result.status, ToolStatus::Success);
    assert_eq!(result.tool, "file_read");
    assert_eq!(
        result.content,
        "<tool_output name=\"file_read\">\npassword=[REDACTED]\n\n</tool_output>"
    );
    let result = r
        .run(
            &call("write_file", json!({"path": "b.txt", "content": "x"})),
            &ctx,
            &DenyAll,
        )
        .await;
    assert_eq!(result.status, ToolStatus::Declined);
    assert!(!dir.path().join("b.txt").exists());
    let result = r
        .run(
            &call("write_file", json!({"path": "b.txt", "content": "x"})),
            &ctx,
            &AutoApprove,
        )
        .await;
    assert_eq!(result.status, ToolStatus::Success);
    assert!(dir.path().join("b.txt").exists());
}

#[tokio::test]
async fn tool_errors_reach_the_model_as_framed_text() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let r = runner(AutonomyLevel::Full);
    let result = r
        .run(
            &call("bash", json!({"command": "rm -rf /"})),
            &ctx,
            &DenyAll,
        )
        .await;
    assert_eq!(result.status, ToolStatus::Failed);
    assert!(result.content.starts_with(
        "<tool_output name=\"shell\" status=\"failed\">\nerror: not permitted: program `rm`"
    ));
    let result = r
        .run(&call("file_read", json!({"path": "../x"})), &ctx, &DenyAll)
        .await;
    assert!(result.content.contains("outside the workspace"));
    let result = r.run(&call("file_read", json!({})), &ctx, &DenyAll).await;
    assert_eq!(result.status, ToolStatus::InvalidArguments);
    assert!(result.content.contains("missing required string `path`"));
}

#[tokio::test]
async fn readonly_autonomy_blocks_builtin_writers() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "s");
    let r = runner(AutonomyLevel::ReadOnly);
    for (name, args) in [
        ("shell", json!({"command": "ls"})),
        ("file_write", json!({"path": "x", "content": ""})),
        ("http_request", json!({"url": "https://example.com"})),
    ] {
        let result = r.run(&call(name, args), &ctx, &AutoApprove).await;
        assert_eq!(result.status, ToolStatus::Denied, "{name}");
    }
    let result = r
        .run(&call("list_dir", json!({})), &ctx, &AutoApprove)
        .await;
    assert_eq!(result.status, ToolStatus::Success);
}
