//! Black-box tests of `cairn routine apply|validate|list|show|enable|disable|delete`
//! against a temporary CAIRN_HOME.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::path::Path;

use assert_cmd::Command;
use predicates::str::contains;

fn cairn(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cairn").unwrap();
    cmd.env_clear().env("CAIRN_HOME", home);
    cmd
}

fn stdout_of(cmd: &mut Command) -> String {
    String::from_utf8(cmd.assert().success().get_output().stdout.clone()).unwrap()
}

fn json_of(cmd: &mut Command) -> serde_json::Value {
    let out = stdout_of(cmd);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn stderr_of_failure(cmd: &mut Command, code: i32) -> String {
    String::from_utf8(cmd.assert().code(code).get_output().stderr.clone()).unwrap()
}

const MORNING: &str = "name: morning\ntimezone: Asia/Tokyo\ntrigger:\n  type: cron\n  schedule: \"0 9 * * *\"\naction:\n  type: notification\n  message: good morning\n";

fn names(home: &Path) -> Vec<String> {
    let list = json_of(cairn(home).args(["routine", "list", "--json"]));
    list.as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn apply_list_show_reapply_edit_disable_enable_delete() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("morning.yaml");
    std::fs::write(&file, MORNING).unwrap();
    let apply = || {
        let mut cmd = cairn(home.path());
        cmd.args(["routine", "apply", "-f"]).arg(&file);
        cmd
    };

    assert!(stdout_of(&mut apply()).starts_with("created   morning"));

    let list = json_of(cairn(home.path()).args(["routine", "list", "--json"]));
    assert_eq!(list[0]["name"], "morning");
    assert_eq!(list[0]["enabled"], true);
    assert_eq!(list[0]["trigger"], "cron 0 9 * * *");
    assert!(
        list[0]["next_fire_local"]
            .as_str()
            .unwrap()
            .ends_with("09:00 JST"),
        "{list}"
    );
    assert!(stdout_of(cairn(home.path()).args(["routine", "list"])).contains("morning"));

    // 09:00 in Tokyo is 00:00 UTC, on five consecutive days.
    let show = json_of(cairn(home.path()).args(["routine", "show", "morning", "--json"]));
    let next: Vec<&str> = show["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(next.len(), 5, "{show}");
    assert!(next.iter().all(|t| t.ends_with("T00:00:00Z")), "{next:?}");
    let days: std::collections::BTreeSet<&str> = next.iter().map(|t| &t[..10]).collect();
    assert_eq!(days.len(), 5, "{next:?}");
    assert_eq!(show["timezone"], "Asia/Tokyo");
    assert!(
        stdout_of(cairn(home.path()).args(["routine", "show", "morning"])).contains("09:00 JST")
    );

    let again = stdout_of(&mut apply());
    assert!(
        again.contains("unchanged morning") && again.contains("nothing changed"),
        "{again}"
    );

    std::fs::write(&file, MORNING.replace("0 9 * * *", "30 7 * * *")).unwrap();
    assert!(stdout_of(&mut apply()).starts_with("updated   morning"));
    let show = json_of(cairn(home.path()).args(["routine", "show", "morning", "--json"]));
    assert!(
        show["next"][0].as_str().unwrap().ends_with("T22:30:00Z"),
        "{show}"
    );

    cairn(home.path())
        .args(["routine", "disable", "morning"])
        .assert()
        .success();
    let list = json_of(cairn(home.path()).args(["routine", "list", "--json"]));
    assert_eq!(list[0]["enabled"], false);
    cairn(home.path())
        .args(["routine", "enable", "morning"])
        .assert()
        .success();
    let list = json_of(cairn(home.path()).args(["routine", "list", "--json"]));
    assert_eq!(list[0]["enabled"], true);

    // No terminal and no --yes: refused, still there.
    let err = stderr_of_failure(cairn(home.path()).args(["routine", "delete", "morning"]), 2);
    assert!(err.contains("--yes"), "{err}");
    assert_eq!(names(home.path()), ["morning"]);
    cairn(home.path())
        .args(["routine", "delete", "morning", "--yes"])
        .assert()
        .success();
    assert!(names(home.path()).is_empty());
}

#[test]
fn unknown_names_suggest_the_closest() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("morning.yaml");
    std::fs::write(&file, MORNING).unwrap();
    cairn(home.path())
        .args(["routine", "apply", "-f"])
        .arg(&file)
        .assert()
        .success();
    cairn(home.path())
        .args(["routine", "show", "mornin"])
        .assert()
        .code(2)
        .stderr(contains("did you mean \"morning\"?"));
}

#[test]
fn five_mistakes_are_all_reported_with_paths_and_lines() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("bad.yaml");
    std::fs::write(
        &file,
        "name: \"bad name!\"\ntrigger:\n  type: cron\n  schedule: \"0 25 * * *\"\naction:\n  type: lightweight\n  prompt: \"\"\n  context_paths:\n    - ok.md\n    - /etc/passwd\nguardrails:\n  max_concurrent: 0\n",
    )
    .unwrap();
    for verb in ["validate", "apply"] {
        let err = stderr_of_failure(
            cairn(home.path()).args(["routine", verb, "-f"]).arg(&file),
            2,
        );
        for (line, path) in [
            (1, "name"),
            (4, "trigger.schedule"),
            (7, "action.prompt"),
            (10, "action.context_paths[1]"),
            (12, "guardrails.max_concurrent"),
        ] {
            assert!(
                err.contains(&format!("bad.yaml:{line}: routine \"bad name!\": {path}: ")),
                "{path} at line {line}:\n{err}"
            );
        }
        assert!(err.contains("5 problems"), "{err}");
    }
    assert!(names(home.path()).is_empty());
}

/// Misspelt fields (serde stops at the first, and had no line inside
/// `trigger:` or `action:`) are each reported at their own line, in one
/// run, with the other problems of what is left.
#[test]
fn two_typos_and_a_bad_value_are_all_reported_at_their_lines() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("typos.yaml");
    std::fs::write(
        &file,
        "name: morning\ndescription: hi\ntrigger:\n  type: cron\n  shedule: \"0 9 * * *\"\n\
         action:\n  type: lightweight\n  prompt: Summarise\n  max_tokns: 300\nguardrails:\n  max_concurrent: 0\n",
    )
    .unwrap();
    let err = stderr_of_failure(
        cairn(home.path())
            .args(["routine", "validate", "-f"])
            .arg(&file),
        2,
    );
    assert!(err.contains("3 problems"), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("typos.yaml") || l.contains("typos.yaml:"))
        .collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines[0].ends_with(
            "typos.yaml:5: trigger.shedule: unknown field `shedule`, expected `schedule`"
        ),
        "{err}"
    );
    assert!(
        lines[1].contains("typos.yaml:9: action.max_tokns: unknown field `max_tokns`"),
        "{err}"
    );
    assert!(
        lines[2].contains("typos.yaml:11: routine \"morning\": guardrails.max_concurrent: "),
        "{err}"
    );
}

#[test]
fn a_directory_with_one_bad_file_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("routines");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.yaml"), MORNING).unwrap();
    std::fs::write(
        dir.join("b.json"),
        r#"{"name": "ping", "trigger": {"type": "manual"}, "action": {"type": "notification", "message": "hi"}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("c.yml"),
        MORNING
            .replace("morning", "evening")
            .replace("Asia/Tokyo", "Asia/Tokio"),
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not a routine").unwrap();

    let err = stderr_of_failure(
        cairn(home.path())
            .args(["routine", "apply", "-f"])
            .arg(&dir),
        2,
    );
    assert!(
        err.contains("c.yml:2: routine \"evening\": timezone: ") && err.contains("\"Asia/Tokio\""),
        "{err}"
    );
    assert!(names(home.path()).is_empty());

    std::fs::write(dir.join("c.yml"), MORNING.replace("morning", "evening")).unwrap();
    let out = stdout_of(
        cairn(home.path())
            .args(["routine", "apply", "-f"])
            .arg(&dir),
    );
    assert_eq!(out.matches("created").count(), 3, "{out}");
    assert_eq!(names(home.path()), ["evening", "morning", "ping"]);
}

#[test]
fn an_invalid_schedule_names_the_routine_and_the_token() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("r.yaml");
    std::fs::write(&file, MORNING.replace("0 9 * * *", "every 5 blorps")).unwrap();
    let err = stderr_of_failure(
        cairn(home.path())
            .args(["routine", "apply", "-f"])
            .arg(&file),
        2,
    );
    assert!(
        err.contains("r.yaml:5: routine \"morning\": trigger.schedule: ") && err.contains("blorps"),
        "{err}"
    );
}

#[test]
fn an_invalid_event_pattern_names_the_routine_and_the_pattern() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("ev.yaml");
    std::fs::write(
        &file,
        "name: deploys\ntrigger:\n  type: event\n  pattern: \"deploy (api\"\naction: {type: notification, message: x}\n",
    )
    .unwrap();
    let err = stderr_of_failure(
        cairn(home.path())
            .args(["routine", "apply", "-f"])
            .arg(&file),
        2,
    );
    assert!(
        err.contains("ev.yaml:4: routine \"deploys\": trigger.pattern: ")
            && err.contains("deploy (api"),
        "{err}"
    );
    assert!(names(home.path()).is_empty());
}

/// The stored webhook secret of routine `name`, read from the database itself.
fn stored_secret(home: &Path, name: &str) -> Option<String> {
    let url = format!("sqlite://{}/cairn.db", home.display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (store, _) = cairn_store::Store::open(&url).await.unwrap();
        let routine = store.find_routine("default", name).await.unwrap().unwrap();
        store.close().await;
        match routine.spec.trigger {
            cairn_core::routine::Trigger::Webhook { secret, .. } => secret,
            other => panic!("not a webhook: {other:?}"),
        }
    })
}

#[test]
fn show_redacts_a_literal_webhook_secret_and_applying_what_it_printed_keeps_it() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("hooks.yaml");
    std::fs::write(
        &file,
        "name: deploys\ntrigger: {type: webhook, path: deploys, secret: hook-S3CR}\n\
         action: {type: notification, message: deployed}\n",
    )
    .unwrap();
    let env_file = home.path().join("env-hook.yaml");
    std::fs::write(
        &env_file,
        "name: builds\ntrigger: {type: webhook, secret: \"${BUILD_HOOK_SECRET}\"}\n\
         action: {type: notification, message: built}\n",
    )
    .unwrap();
    for f in [&file, &env_file] {
        cairn(home.path())
            .args(["routine", "apply", "-f"])
            .arg(f)
            .assert()
            .success();
    }

    let text = stdout_of(cairn(home.path()).args(["routine", "show", "deploys"]));
    assert!(!text.contains("S3CR"), "{text}");
    assert!(text.contains("secret: '***'"), "{text}");
    let show = json_of(cairn(home.path()).args(["routine", "show", "deploys", "--json"]));
    assert!(!show.to_string().contains("S3CR"), "{show}");
    assert_eq!(show["routine"]["spec"]["trigger"]["secret"], "***");
    // A variable's name is not a secret: it is shown as written.
    let env_show = json_of(cairn(home.path()).args(["routine", "show", "builds", "--json"]));
    assert_eq!(
        env_show["routine"]["spec"]["trigger"]["secret"],
        "${BUILD_HOOK_SECRET}"
    );

    // What `show` printed, applied again, keeps the stored secret.
    let shown = home.path().join("shown.json");
    std::fs::write(&shown, show["routine"]["spec"].to_string()).unwrap();
    let again = stdout_of(
        cairn(home.path())
            .args(["routine", "apply", "-f"])
            .arg(&shown),
    );
    assert!(again.contains("unchanged deploys"), "{again}");
    let mut edited = show["routine"]["spec"].clone();
    edited["action"]["message"] = "deployed!".into();
    std::fs::write(&shown, edited.to_string()).unwrap();
    let again = stdout_of(
        cairn(home.path())
            .args(["routine", "apply", "-f"])
            .arg(&shown),
    );
    assert!(again.contains("updated   deploys"), "{again}");
    assert_eq!(
        stored_secret(home.path(), "deploys").as_deref(),
        Some("hook-S3CR")
    );

    // With nothing stored to keep, the marker is refused, naming the field.
    edited["name"] = "copy".into();
    std::fs::write(&shown, edited.to_string()).unwrap();
    let err = stderr_of_failure(
        cairn(home.path())
            .args(["routine", "apply", "-f"])
            .arg(&shown),
        2,
    );
    assert!(
        err.contains("routine \"copy\": trigger.secret:") && err.contains("***"),
        "{err}"
    );
    assert_eq!(names(home.path()), ["builds", "deploys"]);
}

/// `routine create` makes, through the routine service, the routine
/// `routine show` then prints; a schedule it cannot read is refused
/// naming the option, and nothing is made.
#[test]
fn create_makes_a_routine_that_show_prints() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[channels.phone]\ntype = \"log\"\n",
    )
    .unwrap();
    let created = stdout_of(cairn(home.path()).args([
        "routine",
        "create",
        "standup",
        "--schedule",
        "every weekday at 9am",
        "--message",
        "Stand-up in 5 minutes",
        "--channel",
        "phone",
    ]));
    let shown = stdout_of(cairn(home.path()).args(["routine", "show", "standup"]));
    assert_eq!(created, shown);
    assert!(shown.contains("name:         standup"), "{shown}");
    let json = json_of(cairn(home.path()).args(["routine", "show", "standup", "--json"]));
    let spec = &json["routine"]["spec"];
    assert_eq!(spec["trigger"]["type"], "cron", "{json}");
    assert_eq!(spec["trigger"]["schedule"], "every weekday at 9am");
    assert_eq!(spec["action"]["type"], "notification");
    assert_eq!(spec["action"]["message"], "Stand-up in 5 minutes");
    assert_eq!(spec["notify"]["channel"], "phone");
    assert_eq!(json["next"].as_array().unwrap().len(), 5, "{json}");

    let once = json_of(cairn(home.path()).args([
        "routine",
        "create",
        "tea",
        "--schedule",
        "in 20m",
        "--prompt",
        "Is the tea ready?",
        "--json",
    ]));
    assert_eq!(once["routine"]["spec"]["trigger"]["type"], "once", "{once}");
    assert_eq!(once["routine"]["spec"]["action"]["type"], "lightweight");

    let err = stderr_of_failure(
        cairn(home.path()).args([
            "routine",
            "create",
            "bad",
            "--schedule",
            "every blursday",
            "--message",
            "x",
        ]),
        2,
    );
    assert!(err.contains("--schedule \"every blursday\": "), "{err}");
    let err = stderr_of_failure(
        cairn(home.path()).args([
            "routine",
            "create",
            "x",
            "--schedule",
            "every day at 8am",
            "--message",
            "x",
            "--channel",
            "fone",
        ]),
        2,
    );
    assert!(
        err.contains("--channel: no channel named \"fone\""),
        "{err}"
    );
    let err = stderr_of_failure(
        cairn(home.path()).args([
            "routine",
            "create",
            "standup",
            "--schedule",
            "every day at 8am",
            "--message",
            "x",
        ]),
        2,
    );
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(names(home.path()), ["standup", "tea"]);
}
