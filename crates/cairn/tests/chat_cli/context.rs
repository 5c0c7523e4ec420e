//! What a chat brings into its context besides the person's lines: a turn
//! resumed after a crash, unread notifications, a finished background task,
//! the tools offered and their schemas, skills.

use super::*;

#[test]
fn a_turn_killed_mid_flight_is_resumed_by_the_next_chat() {
    use std::io::Write;
    use std::process::Stdio;
    let env = Env::new();
    env.server.push(Scripted::tool_call("time_now", json!({})));
    env.server
        .push(Scripted::text("never arrives").with_delay(std::time::Duration::from_secs(600)));
    let mut first = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    first
        .env_clear()
        .envs(env.cairn().get_envs().filter_map(|(k, v)| Some((k, v?))));
    let mut child = first
        .arg("chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "what time is it in Lima?").unwrap();
    // The second model call means the tool ran and its result was sent.
    for _ in 0..2000 {
        if env.server.requests().len() >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        env.server.requests().len(),
        2,
        "the turn never reached its second call"
    );
    child.kill().unwrap(); // SIGKILL: no chance to save anything more
    child.wait().unwrap();
    drop(stdin);

    env.server.push(Scripted::text("It is 9 in Lima."));
    env.cairn()
        .arg("chat")
        .write_stdin("/resume\n/quit\n")
        .assert()
        .success()
        .stdout(contains("interrupted").and(contains("It is 9 in Lima.")));
    let resumed = text_of(&env.sent(2));
    assert!(resumed.contains("what time is it in Lima?"), "{resumed}");
    assert!(
        resumed.contains("\"role\":\"tool\""),
        "the tool result recorded before the kill is sent, not re-run: {resumed}"
    );
    assert_eq!(env.server.requests().len(), 3);
}

#[test]
fn the_chat_shows_unread_inbox_notifications_once() {
    let env = Env::new();
    env.cairn()
        .args(["notify", "test", "inbox", "--message", "water the tomatoes"])
        .assert()
        .success();
    env.cairn()
        .arg("chat")
        .write_stdin("/quit\n")
        .assert()
        .success()
        .stdout(contains("[inbox] 1 unread notification(s):").and(contains("water the tomatoes")));
    env.cairn()
        .arg("chat")
        .write_stdin("/quit\n")
        .assert()
        .success()
        .stdout(contains("[inbox]").not());
}

#[test]
fn piped_chat_reacts_to_a_finished_background_task_without_another_line() {
    let env = Env::new();
    std::fs::write(
        env.home.path().join("config.toml"),
        "[tools.shell]\nallowed_programs = [\"sleep\"]\n",
    )
    .unwrap();
    env.server.push(Scripted::tool_call(
        "background_run",
        json!({"name": "shell", "params": {"command": "sleep 1"}}),
    ));
    env.server
        .push(Scripted::text("Started it in the background."));
    env.server.push(Scripted::text("The sleep has finished."));
    env.cairn()
        .args(["chat", "--yes"])
        .write_stdin("sleep for a second in the background\n")
        .assert()
        .success()
        .stdout(contains("Started it in the background.").and(contains("The sleep has finished.")));
    // The reaction came from a turn of its own, fed with the notice.
    let requests = env.server.requests();
    assert_eq!(requests.len(), 3);
    let notice = text_of(&env.sent(2));
    assert!(notice.contains("automatic notice from cairn"), "{notice}");
    assert!(
        notice.contains("[BACKGROUND TASK COMPLETED] task_id=bg-"),
        "{notice}"
    );
    assert!(notice.contains("tool=shell"), "{notice}");
}

/// GUIDE's budget: the first request for a one-line message, with every tool
/// registered, is at most 6 KB of JSON. Schemas beyond the core tools are
/// listed by name and loaded on demand with `tool_schema`.
#[test]
fn the_first_request_for_hi_fits_in_6_kb_with_every_tool() {
    let env = Env::new();
    // A search provider, so web_search is registered too.
    std::fs::write(
        env.home.path().join("config.toml"),
        "[tools.web_search]\nprovider = \"searxng\"\nurl = \"http://127.0.0.1:9\"\n",
    )
    .unwrap();
    env.server.push(Scripted::text("Hello."));
    env.cairn().args(["chat", "-m", "hi"]).assert().success();
    let request = &env.server.requests()[0].body;
    let body = serde_json::to_string(request).unwrap();
    let schemas = request["tools"].as_array().unwrap().len();
    eprintln!(
        "first request: {} bytes, {schemas} tool schemas",
        body.len()
    );
    assert!(body.len() <= 6 * 1024, "{} bytes: {body}", body.len());
    // The tools without a schema are still named, by family.
    let system = request["messages"][0]["content"].as_str().unwrap();
    for listed in [
        "remember, schedule_{cancel,cron,list,once,status}: ",
        "background_{cancel,list,result,run,status,wait}: ",
        "routine_{backfill,create,delete,fire,list,next,pause,resume,runs,update}: ",
        "- send_notification: ",
        "- web_fetch: ",
        "- web_search: ",
    ] {
        assert!(
            system.contains(listed),
            "every tool is named: {listed}\n{system}"
        );
    }
}

#[test]
fn a_schema_loaded_with_tool_schema_is_offered_from_then_on() {
    let env = Env::new();
    env.server.push_all([
        Scripted::tool_call("tool_schema", json!({"names": ["remember", "nope"]})),
        Scripted::text("Loaded."),
    ]);
    env.cairn()
        .args(["chat", "-m", "remind me"])
        .assert()
        .success();
    let requests = env.server.requests();
    let offered = |n: usize| -> Vec<String> {
        requests[n].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!offered(0).contains(&"remember".to_string()));
    assert!(
        offered(1).contains(&"remember".to_string()),
        "{:?}",
        offered(1)
    );
    let result = text_of(&env.sent(1));
    assert!(
        result.contains("\\\"when\\\""),
        "the schema came back: {result}"
    );
    assert!(
        result.contains("nope"),
        "unknown names are reported: {result}"
    );
}

/// Skills: the first request names each skill with its description and path,
/// never its body; the body is read with file_read, also from `skills.paths`
/// (read-only); a broken SKILL.md is skipped and doctor names its line.
#[test]
fn skills_are_listed_by_name_and_read_on_demand() {
    let env = Env::new();
    let extra = tempfile::tempdir().unwrap();
    let skill = |dir: &std::path::Path, folder: &str, text: &str| {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        std::fs::write(dir.join(folder).join("SKILL.md"), text).unwrap();
    };
    skill(
        &env.workspace().join("skills"),
        "haiku",
        "---\nname: haiku\ndescription: Write haiku in 5-7-5.\n---\nCOUNT THE SYLLABLES TWICE\n",
    );
    skill(
        extra.path(),
        "pdf-forms",
        "---\nname: pdf-forms\ndescription: Fill PDF forms.\n---\nUSE THE FORM FIELDS\n",
    );
    skill(
        extra.path(),
        "broken",
        "---\nname: broken\ndescription: [oops\n---\n",
    );
    std::fs::write(
        env.home.path().join("config.toml"),
        // Autonomy `full`: the write is not declined, so the path check answers.
        format!(
            "[skills]\npaths = [\"{}\"]\n\n[tools.policy]\nautonomy = \"full\"\n",
            extra.path().display()
        ),
    )
    .unwrap();
    let pdf = extra.path().join("pdf-forms/SKILL.md");
    env.server.push_all([
        Scripted::tool_calls([
            (
                "file_read",
                serde_json::json!({"path": pdf.display().to_string()}),
            ),
            (
                "file_write",
                serde_json::json!({"path": pdf.display().to_string(), "content": "x"}),
            ),
        ]),
        Scripted::text("Done."),
    ]);
    env.cairn()
        .args(["chat", "-m", "fill my form"])
        .assert()
        .success();
    let first = serde_json::to_string(&env.server.requests()[0].body).unwrap();
    assert!(
        first.contains("- haiku: Write haiku in 5-7-5. (skills/haiku/SKILL.md)"),
        "{first}"
    );
    assert!(first.contains("- pdf-forms: Fill PDF forms."), "{first}");
    assert!(!first.contains("COUNT THE SYLLABLES") && !first.contains("USE THE FORM FIELDS"));
    assert!(!first.contains("broken"));
    let results = text_of(&env.sent(1));
    assert!(results.contains("USE THE FORM FIELDS"), "{results}");
    assert!(results.contains("outside the workspace"), "{results}");
    assert_eq!(
        std::fs::read_to_string(&pdf).unwrap(),
        "---\nname: pdf-forms\ndescription: Fill PDF forms.\n---\nUSE THE FORM FIELDS\n"
    );

    let listed = env
        .cairn()
        .args(["skill", "list", "--json"])
        .assert()
        .success();
    let listed: serde_json::Value = serde_json::from_slice(&listed.get_output().stdout).unwrap();
    assert_eq!(listed["skills"][0]["name"], "haiku");
    assert_eq!(listed["skills"][1]["name"], "pdf-forms");
    // The parser finds the unclosed list where the front matter ends.
    assert_eq!(listed["skipped"][0]["line"], 4, "{listed}");
    env.cairn()
        .args(["skill", "show", "haiku"])
        .assert()
        .success()
        .stdout(contains("COUNT THE SYLLABLES TWICE"));
    env.cairn()
        .args(["skill", "show", "nope"])
        .assert()
        .failure()
        .stderr(contains("no skill named `nope`"));
    env.cairn().arg("doctor").assert().stdout(contains(format!(
        "{}:{}:",
        extra.path().join("broken/SKILL.md").display(),
        4
    )));
}
