//! Black-box tests of `cairn job list|show|cancel`, with jobs seeded in the
//! same SQLite file the binary opens.
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use cairn_core::job::{JobOutcome, JobRecord, JobState};
use cairn_store::Store;
use chrono::{DateTime, Utc};
use predicates::str::contains;
use uuid::Uuid;

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

fn block_on<T>(future: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// The database the binary uses under `home`, opened (and migrated) here.
async fn store(home: &Path) -> Store {
    let url = format!("sqlite://{}/cairn.db", home.display());
    Store::open(&url).await.unwrap().0
}

fn ago(minutes: i64) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::minutes(minutes)
}

fn job(title: &str, created: DateTime<Utc>) -> JobRecord {
    let mut job = JobRecord::new(
        Uuid::now_v7(),
        title,
        format!("Please {title}."),
        "ada",
        created,
    );
    job.lease_owner = Some("pid1-daemon".into());
    job.lease_until = Some(Utc::now() + chrono::Duration::minutes(5));
    job.timeout = Duration::from_secs(600);
    job
}

/// Seeds a pending, a running and a completed job, oldest first.
fn seed(home: &Path) -> (JobRecord, JobRecord, JobRecord) {
    block_on(async {
        let store = store(home).await;
        let done = job("summarise the inbox", ago(120));
        let running = job("tidy the downloads", ago(30));
        let pending = job("water the plants", ago(1));
        for j in [&done, &running, &pending] {
            store.create_job(j).await.unwrap();
        }
        for j in [&done, &running] {
            let until = Utc::now() + chrono::Duration::minutes(5);
            store
                .start_job(j.id, "pid1-daemon", until, ago(29))
                .await
                .unwrap();
        }
        let outcome = JobOutcome {
            state: JobState::Completed,
            result: Some("3 messages need a reply.\nThe rest is newsletters.".into()),
            error: None,
            iterations: 2,
            input_tokens: 12,
            output_tokens: 3,
            cost_micros: 18,
            completed_at: ago(100),
        };
        store.finish_job(done.id, &outcome).await.unwrap();
        let mut seeded = Vec::new();
        for j in [&pending, &running, &done] {
            seeded.push(store.get_job(j.id).await.unwrap().unwrap());
        }
        store.close().await;
        let [pending, running, done] = <[JobRecord; 3]>::try_from(seeded).unwrap();
        (pending, running, done)
    })
}

fn stored(home: &Path, id: Uuid) -> JobRecord {
    block_on(async {
        let store = store(home).await;
        let job = store.get_job(id).await.unwrap().unwrap();
        store.close().await;
        job
    })
}

#[test]
fn list_with_no_jobs() {
    let home = tempfile::tempdir().unwrap();
    assert!(stdout_of(cairn(home.path()).args(["job", "list"])).contains("no jobs"));
    assert_eq!(
        json_of(cairn(home.path()).args(["job", "list", "--json"])),
        serde_json::json!([])
    );
}

#[test]
fn list_shows_recent_jobs_first_and_filters_by_state() {
    let home = tempfile::tempdir().unwrap();
    let (pending, running, done) = seed(home.path());
    let text = stdout_of(cairn(home.path()).args(["job", "list"]));
    let at = |id: Uuid| text.find(&id.to_string()).unwrap();
    assert!(
        at(pending.id) < at(running.id) && at(running.id) < at(done.id),
        "{text}"
    );
    assert!(
        text.contains("water the plants") && text.contains("pending"),
        "{text}"
    );
    assert!(
        text.contains("in_progress") && text.contains("30m"),
        "{text}"
    );
    assert!(text.contains("completed") && text.contains("2h"), "{text}");

    let all = json_of(cairn(home.path()).args(["job", "list", "--json"]));
    let ids: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            pending.id.to_string(),
            running.id.to_string(),
            done.id.to_string()
        ]
    );
    assert_eq!(all[0]["state"], "pending");

    let completed =
        json_of(cairn(home.path()).args(["job", "list", "--state", "completed", "--json"]));
    assert_eq!(completed.as_array().unwrap().len(), 1);
    assert_eq!(completed[0]["id"], done.id.to_string());
    let limited = json_of(cairn(home.path()).args(["job", "list", "--limit", "1", "--json"]));
    assert_eq!(limited.as_array().unwrap().len(), 1);

    cairn(home.path())
        .args(["job", "list", "--state", "running"])
        .assert()
        .code(2)
        .stderr(contains("in_progress"));
}

#[test]
fn sub_agents_are_marked_in_the_list_and_name_their_turn_in_show() {
    let home = tempfile::tempdir().unwrap();
    let (_, running, _) = seed(home.path());
    let child = block_on(async {
        let store = store(home.path()).await;
        let mut child = job("look it up", ago(0));
        child.origin = Some(format!("delegate:job:{}", running.id));
        child.parent_id = Some(running.id);
        store.create_job(&child).await.unwrap();
        store.close().await;
        child
    });
    let text = stdout_of(cairn(home.path()).args(["job", "list"]));
    assert!(text.contains("↳ look it up"), "{text}");
    assert!(!text.contains("↳ tidy the downloads"), "{text}");
    let shown = stdout_of(cairn(home.path()).args(["job", "show", &child.id.to_string()]));
    assert!(
        shown.contains(&format!("parent:        {}", running.id)),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "sub-agent of:  the turn of session job:{}",
            running.id
        )),
        "{shown}"
    );
}

#[test]
fn show_prints_every_field_with_the_result() {
    let home = tempfile::tempdir().unwrap();
    let (_, _, done) = seed(home.path());
    let id = done.id.to_string();
    let text = stdout_of(cairn(home.path()).args(["job", "show", &id]));
    for expected in [
        id.as_str(),
        "summarise the inbox",
        "completed",
        "owner:         ada",
        "iterations:    2 of 50",
        "12 in, 3 out",
        "$0.000018",
        "600s",
        "Please summarise the inbox.",
        "result:\n  3 messages need a reply.\n  The rest is newsletters.",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!text.contains("error:"), "{text}");

    let json = json_of(cairn(home.path()).args(["job", "show", &id, "--json"]));
    assert_eq!(json["state"], "completed");
    assert_eq!(json["input_tokens"], 12);
    assert_eq!(json["cost_micros"], 18);
    assert_eq!(json["timeout"], "600s");
    assert_eq!(
        json["result"],
        "3 messages need a reply.\nThe rest is newsletters."
    );
}

#[test]
fn cancel_stops_a_pending_job_at_once() {
    let home = tempfile::tempdir().unwrap();
    let (pending, _, _) = seed(home.path());
    let id = pending.id.to_string();
    let text = stdout_of(cairn(home.path()).args(["job", "cancel", &id]));
    assert!(
        text.contains("cancelled job") && text.contains(&id),
        "{text}"
    );
    let job = stored(home.path(), pending.id);
    assert_eq!(job.state, JobState::Cancelled);
    assert!(job.error.unwrap().contains("before it started"));
    let shown = stdout_of(cairn(home.path()).args(["job", "show", &id]));
    assert!(
        shown.contains("error:\n  cancelled before it started"),
        "{shown}"
    );
}

#[test]
fn cancel_asks_the_process_running_a_job() {
    let home = tempfile::tempdir().unwrap();
    let (_, running, _) = seed(home.path());
    let id = running.id.to_string();
    let json = json_of(cairn(home.path()).args(["job", "cancel", &id, "--json"]));
    assert_eq!(json["outcome"], "requested");
    assert_eq!(json["state"], "in_progress");
    let job = stored(home.path(), running.id);
    assert!(job.cancel_requested);
    assert_eq!(
        job.state,
        JobState::InProgress,
        "its process decides when it stops"
    );
    let listed = stdout_of(cairn(home.path()).args(["job", "list"]));
    assert!(listed.contains("in_progress*"), "{listed}");
    let shown = stdout_of(cairn(home.path()).args(["job", "show", &id]));
    assert!(shown.contains("in_progress (cancel requested)"), "{shown}");
}

#[test]
fn cancel_of_an_ended_job_is_an_error() {
    let home = tempfile::tempdir().unwrap();
    let (_, _, done) = seed(home.path());
    cairn(home.path())
        .args(["job", "cancel", &done.id.to_string()])
        .assert()
        .code(1)
        .stderr(contains("already ended (completed)"));
    assert_eq!(stored(home.path(), done.id).state, JobState::Completed);
}

#[test]
fn unknown_and_malformed_ids() {
    let home = tempfile::tempdir().unwrap();
    let unknown = Uuid::now_v7().to_string();
    for command in ["show", "cancel"] {
        cairn(home.path())
            .args(["job", command, &unknown])
            .assert()
            .code(1)
            .stderr(contains(format!("job {unknown} not found")));
        cairn(home.path())
            .args(["job", command, "not-an-id", "--json"])
            .assert()
            .code(2)
            .stderr(contains("not a job id: \"not-an-id\""));
    }
}

/// A job is named by its id as any place shows it: the short form chat
/// prints (its last 8 hex digits), or a start of it; a start several jobs
/// share is refused, naming the problem.
#[test]
fn short_ids_and_prefixes_are_accepted_and_an_ambiguous_one_refused() {
    let home = tempfile::tempdir().unwrap();
    let (pending, running, done) = seed(home.path());
    let short = cairn_core::job::short_id(done.id);
    let text = stdout_of(cairn(home.path()).args(["job", "show", &short]));
    assert!(text.contains(&done.id.to_string()), "{text}");
    let start = &running.id.simple().to_string()[..24];
    let json = json_of(cairn(home.path()).args(["job", "show", start, "--json"]));
    assert_eq!(json["id"], running.id.to_string());
    cairn(home.path())
        .args(["job", "cancel", &cairn_core::job::short_id(pending.id)])
        .assert()
        .success();
    assert_eq!(stored(home.path(), pending.id).state, JobState::Cancelled);
    // v7 ids made a moment apart share their first 4 digits (weeks of time).
    let shared = &pending.id.simple().to_string()[..4];
    cairn(home.path())
        .args(["job", "show", shared])
        .assert()
        .code(2)
        .stderr(contains(format!("\"{shared}\" matches several jobs")));
}
