//! Routines of several agents (`agent: family`, issue 45): a daemon with
//! `main` and `family` (another model, no `shell`) runs a routine of
//! `family` as family (its model, its identity, its tools), while `main`'s
//! keeps `main`'s; an agent that is not configured is refused where the
//! routine is written (`routine apply`, the API) naming the field, and a
//! routine whose agent was removed fails its run rather than run as main.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use cairn_llm::testing::{FakeLlmServer, Scripted};
use serde_json::{Value, json};

mod common;
use common::agents::*;

/// `main` (its USER.md) and `family`: Pip, another model, no `shell`.
fn home_with_two_agents(home: &Path) {
    std::fs::write(
        home.join("config.toml"),
        "[[agents]]\nid = \"family\"\nname = \"Pip\"\nmodel = \"family-model\"\n\
         tools = { deny = [\"shell\"] }\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join("workspace")).unwrap();
    std::fs::write(home.join("workspace/USER.md"), "MAIN-IDENTITY-7731\n").unwrap();
    std::fs::create_dir_all(home.join("agents/family")).unwrap();
    std::fs::write(home.join("agents/family/USER.md"), "FAMILY-IDENTITY-4410\n").unwrap();
}

/// A routine file fired by hand doing a `full_job`, with `agent` as given.
fn job_routine(home: &Path, name: &str, agent: &str) -> std::path::PathBuf {
    let file = home.join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        format!(
            "name: {name}\n{agent}trigger: {{type: manual}}\n\
             action: {{type: full_job, title: Chores, description: 'list the chores of {name}'}}\n"
        ),
    )
    .unwrap();
    file
}

/// Fires `name` through the API and waits for its run to end.
fn fire_and_wait(base: &str, token: &str, name: &str) -> Value {
    let (status, fired) = call(
        base,
        token,
        &format!("/api/routines/{name}/fire"),
        Some(json!({})),
    );
    assert_eq!(status, 202, "{fired}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, runs) = call(base, token, &format!("/api/routines/{name}/runs"), None);
        assert_eq!(status, 200, "{runs}");
        let run = &runs[0];
        if !matches!(run["status"].as_str(), None | Some("running" | "waiting")) {
            return run.clone();
        }
        assert!(Instant::now() < deadline, "the run did not end: {runs}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_routine_of_family_runs_with_its_model_identity_and_tools_and_mains_with_mains() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    home_with_two_agents(home);
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let family = job_routine(home, "family-chores", "agent: family\n");
    let main = job_routine(home, "main-chores", "");
    for file in [&family, &main] {
        let out = cairn(home, &llm)
            .args(["routine", "apply", "-f"])
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (_daemon, base, token) = daemon(home, &llm);

    llm.push(Scripted::text("ROUTINE_OK"));
    let run = fire_and_wait(&base, &token, "family-chores");
    assert_eq!(run["status"], "ok", "{run}");
    assert!(run["job_id"].is_null(), "{run}");
    llm.push(Scripted::text("ROUTINE_OK"));
    let run = fire_and_wait(&base, &token, "main-chores");
    assert_eq!(run["status"], "ok", "{run}");
    assert!(run["job_id"].is_string(), "main's full_job is a job: {run}");

    let requests: Vec<Value> = llm.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let (family, main) = (&requests[0], &requests[1]);
    assert_eq!(family["model"], "family-model");
    let prompt = system(family);
    assert!(
        prompt.contains("FAMILY-IDENTITY-4410") && prompt.contains("Pip"),
        "{prompt}"
    );
    assert!(!prompt.contains("MAIN-IDENTITY-7731"), "{prompt}");
    assert!(
        family
            .to_string()
            .contains("list the chores of family-chores")
    );
    let offered = tools(family);
    assert!(offered.iter().any(|t| t == "file_read"), "{offered:?}");
    assert!(!offered.iter().any(|t| t == "shell"), "{offered:?}");

    assert_eq!(main["model"], "test-model");
    let prompt = system(main);
    assert!(
        prompt.contains("MAIN-IDENTITY-7731") && !prompt.contains("FAMILY-IDENTITY-4410"),
        "{prompt}"
    );
    assert!(
        tools(main).iter().any(|t| t == "shell"),
        "{:?}",
        tools(main)
    );

    // The API shows the agent and refuses one that is not configured, at `agent`.
    let (status, view) = call(&base, &token, "/api/routines/family-chores", None);
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["agent"], "family");
    assert_eq!(view["spec"]["agent"], "family");
    let (_, view) = call(&base, &token, "/api/routines/main-chores", None);
    assert_eq!(view["agent"], "main");
    assert!(view["spec"].get("agent").is_none(), "{view}");
    let spec = json!({
        "name": "stray", "agent": "famly",
        "trigger": {"type": "manual"},
        "action": {"type": "notification", "message": "hi"}
    });
    let (status, refused) = call(&base, &token, "/api/routines", Some(spec));
    assert_eq!(status, 422, "{refused}");
    let problems = &refused["error"]["details"]["problems"];
    assert_eq!(problems[0]["path"], "agent", "{refused}");
    assert_eq!(
        problems[0]["message"],
        "no agent \"famly\" in [[agents]]; did you mean \"family\"? (configured: main, family)"
    );
    // The dashboard's routine form offers both.
    let (status, agents) = call(&base, &token, "/ui/api/routines/agents", None);
    assert_eq!(status, 200, "{agents}");
    assert_eq!(agents["agents"][0]["id"], "main");
    assert_eq!(agents["agents"][1], json!({"id": "family", "name": "Pip"}));
}

#[test]
fn apply_refuses_an_unknown_agent_naming_the_field_and_agent_fills_those_naming_none() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path();
    home_with_two_agents(home);
    let llm = FakeLlmServer::start_on_thread().unwrap();
    let run = |args: &[&str]| cairn(home, &llm).args(args).output().unwrap();

    let stray = job_routine(home, "stray", "agent: famly\n");
    for verb in ["apply", "validate"] {
        let out = run(&["routine", verb, "-f", stray.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{verb}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "{}:2: routine \"stray\": agent: no agent \"famly\" in [[agents]]; did you mean \"family\"? (configured: main, family)",
                stray.display()
            )),
            "{verb}: {stderr}"
        );
    }
    let out = run(&["routine", "list", "--json"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");

    // --agent gives an agent to the routines naming none; theirs wins.
    let dir = home.join("routines");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a.yaml"),
        "name: plain\ntrigger: {type: manual}\naction: {type: notification, message: hi}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.yaml"),
        "name: own\nagent: main\ntrigger: {type: manual}\naction: {type: notification, message: hi}\n",
    )
    .unwrap();
    let out = run(&[
        "routine",
        "apply",
        "-f",
        dir.to_str().unwrap(),
        "--agent",
        "famly",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--agent: no agent \"famly\" in [[agents]]; did you mean \"family\"?"),
        "{stderr}"
    );
    let out = run(&[
        "routine",
        "apply",
        "-f",
        dir.to_str().unwrap(),
        "--agent",
        "family",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["routine", "list", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let agents: Vec<(&str, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["agent"].as_str().unwrap()))
        .collect();
    assert_eq!(agents, [("own", "main"), ("plain", "family")]);
    let table = String::from_utf8_lossy(&run(&["routine", "list"]).stdout).to_string();
    assert!(table.lines().next().unwrap().contains("AGENT"), "{table}");
    let plain = table.lines().find(|l| l.starts_with("plain")).unwrap();
    assert!(plain.contains(" family "), "{table}");
    let show = String::from_utf8_lossy(&run(&["routine", "show", "plain"]).stdout).to_string();
    assert!(show.contains("\nagent:        family\n"), "{show}");
    assert!(
        show.contains("  agent: family\n"),
        "the spec shows it: {show}"
    );
    let show = String::from_utf8_lossy(&run(&["routine", "show", "own"]).stdout).to_string();
    assert!(!show.contains("\nagent:"), "main is not shown: {show}");

    // Its agent removed from the configuration, the routine fails its run
    // saying why, and runs as nobody else.
    std::fs::write(home.join("config.toml"), "").unwrap();
    let out = run(&["routine", "fire", "plain"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("failed: this routine runs as agent \"family\", which is not here: it is not in [[agents]]"),
        "{stdout}"
    );
    let out = run(&["routine", "fire", "own"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(llm.requests().is_empty());
}
