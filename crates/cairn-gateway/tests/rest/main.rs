//! The REST API: routines (CRUD, validation, fire, runs) and notifications;
//! sessions, jobs, status and the bearer token on every route are in
//! `sessions_jobs_status.rs`.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

#[path = "../support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use cairn_agent::chat::{ChatSink, Inbound};
use cairn_llm::testing::Scripted;
use serde_json::{Value, json};
use support::{TestGateway, error_code};

mod sessions_jobs_status;

struct Quiet;
impl ChatSink for Quiet {}

fn reminder(name: &str) -> Value {
    json!({
        "name": name,
        "description": "says hello",
        "trigger": {"type": "manual"},
        "action": {"type": "notification", "message": "hello from the API"}
    })
}

async fn json_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// Polls `path` until `done` holds for its JSON, for at most 10 s.
async fn wait_for(gw: &TestGateway, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = json_of(gw.get(path).send().await.unwrap()).await;
        if done(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting on {path}: {body}"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_routine_round_trips_through_create_read_replace_delete() {
    let gw = TestGateway::start().await;
    let (status, created) = json_of(
        gw.post("/api/routines")
            .json(&json!({
                "name": "daily",
                "timezone": "Europe/Paris",
                "trigger": {"type": "cron", "schedule": "0 9 * * *"},
                "action": {"type": "notification", "message": "morning"}
            }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "daily");
    assert_eq!(created["trigger"], "cron 0 9 * * *");
    assert_eq!(created["timezone"], "Europe/Paris");
    assert!(created["next_fire_at"].is_string(), "{created}");
    let id = created["id"].as_str().unwrap().to_string();

    // Taken names are a conflict.
    let (status, code) = error_code(
        gw.post("/api/routines")
            .json(&reminder("daily"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (409, "conflict"));

    let (_, list) = json_of(gw.get("/api/routines").send().await.unwrap()).await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["enabled"], true);
    assert_eq!(list[0]["last_status"], Value::Null);

    // By id and by name alike.
    for key in [id.as_str(), "daily"] {
        let (status, one) = json_of(
            gw.get(&format!("/api/routines/{key}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 200, "{one}");
        assert_eq!(one["spec"]["action"]["message"], "morning");
    }

    // Renaming onto another routine's name is a conflict.
    gw.post("/api/routines")
        .json(&reminder("other"))
        .send()
        .await
        .unwrap();
    let (status, code) = error_code(
        gw.http
            .put(gw.url("/api/routines/daily"))
            .bearer_auth(&gw.token)
            .json(&reminder("other"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (409, "conflict"));

    // Replace, renaming it: the id stays.
    let mut spec = reminder("renamed");
    spec["enabled"] = json!(false);
    let (status, replaced) = json_of(
        gw.http
            .put(gw.url("/api/routines/daily"))
            .bearer_auth(&gw.token)
            .json(&spec)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{replaced}");
    assert_eq!(replaced["id"], id.as_str());
    assert_eq!(replaced["name"], "renamed");
    assert_eq!(replaced["enabled"], false);
    assert_eq!(replaced["next_fire_at"], Value::Null);
    assert_eq!(
        gw.store
            .get_routine(id.parse().unwrap())
            .await
            .unwrap()
            .unwrap()
            .spec
            .name,
        "renamed"
    );

    let deleted = gw
        .http
        .delete(gw.url(&format!("/api/routines/{id}")))
        .bearer_auth(&gw.token)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let (status, code) = error_code(gw.get("/api/routines/renamed").send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (404, "not_found"));
    gw.stop().await;
}

#[tokio::test]
async fn an_invalid_routine_is_422_with_every_problem_and_its_path() {
    let gw = TestGateway::start().await;
    let (status, body) = json_of(
        gw.post("/api/routines")
            .json(&json!({
                "name": "bad name!",
                "trigger": {"type": "cron", "schedule": "0 9 * * mon-fry"},
                "action": {"type": "notification", "message": "x"},
                "timezone": "Mars/Olympus"
            }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid");
    let paths: Vec<&str> = body["error"]["details"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    for want in ["name", "trigger.schedule", "timezone"] {
        assert!(paths.contains(&want), "{want} missing from {body}");
    }

    // A shape problem names its path too.
    let (status, body) = json_of(
        gw.post("/api/routines")
            .json(&json!({
                "name": "ok",
                "trigger": {"type": "cron", "schedule": "0 9 * * *"},
                "action": {"type": "notification", "message": "x"},
                "guardrails": {"cooldown": "soon"}
            }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"]["details"]["problems"][0]["path"], "guardrails.cooldown",
        "{body}"
    );

    // A one-shot in the past, judged as of now, as `routine apply` does.
    let (status, body) = json_of(
        gw.post("/api/routines")
            .json(&json!({
                "name": "late",
                "trigger": {"type": "once", "at": "2001-01-01T00:00:00Z"},
                "action": {"type": "notification", "message": "x"}
            }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"]["details"]["problems"][0]["path"],
        "trigger.at"
    );

    // NUL characters are refused wherever they are (PostgreSQL cannot store them).
    let mut spec = reminder("nul");
    spec["description"] = json!("a\u{0}b");
    spec["action"]["message"] = json!("\u{0}");
    let (status, body) = json_of(gw.post("/api/routines").json(&spec).send().await.unwrap()).await;
    assert_eq!(status, 422, "{body}");
    let mut paths: Vec<&str> = body["error"]["details"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, ["action.message", "description"], "{body}");
    let (status, _) = error_code(gw.get("/api/routines/a%00b").send().await.unwrap()).await;
    assert_eq!(status, 404);

    // Nothing was written; a replace is judged the same way.
    assert!(gw.store.list_routines(None).await.unwrap().is_empty());
    gw.post("/api/routines")
        .json(&reminder("fine"))
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(
        gw.http
            .put(gw.url("/api/routines/fine"))
            .bearer_auth(&gw.token)
            .json(&json!({"name": "", "trigger": {"type": "manual"}, "action": {"type": "notification", "message": ""}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["details"]["problems"]
            .as_array()
            .unwrap()
            .len()
            >= 2,
        "{body}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_fired_routine_runs_and_its_notification_reaches_the_inbox() {
    let gw = TestGateway::start().await;
    gw.post("/api/routines")
        .json(&reminder("hello"))
        .send()
        .await
        .unwrap();
    let (status, fired) = json_of(
        gw.post("/api/routines/hello/fire")
            .json(&json!({"who": "api"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 202, "{fired}");
    let run_id = fired["run_id"].as_str().unwrap().to_string();

    let runs = wait_for(&gw, "/api/routines/hello/runs?limit=5", |runs| {
        runs.as_array()
            .and_then(|r| r.first())
            .is_some_and(|r| r["status"] != "running")
    })
    .await;
    assert_eq!(runs[0]["id"], run_id.as_str());
    assert_eq!(runs[0]["trigger_type"], "manual");
    assert_eq!(runs[0]["status"], "ok", "{runs}");
    assert!(runs[0]["notification_id"].is_string(), "{runs}");
    let (status, code) = error_code(
        gw.get("/api/routines/hello/runs?limit=0")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "bad_request"));

    // The notification was recorded (no channels: it goes to the inbox).
    let list = wait_for(&gw, "/api/notifications", |l| {
        l.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    assert_eq!(list[0]["body"], "hello from the API", "{list}");
    let id = list[0]["id"].as_str().unwrap().to_string();
    let (_, filtered) = json_of(
        gw.get("/api/notifications?status=failed&limit=10")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(
        filtered
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["status"] == "failed")
    );
    let (status, code) = error_code(
        gw.get("/api/notifications?status=lost")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "bad_request"));

    let inbox = wait_for(&gw, "/api/notifications/inbox", |l| {
        l.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    assert_eq!(inbox[0]["id"], id.as_str());
    assert_eq!(inbox[0]["read_at"], Value::Null);
    let (status, marked) = json_of(
        gw.post(&format!("/api/notifications/{id}/read"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, marked["marked"].as_u64()), (200, Some(1)));
    let (_, inbox) = json_of(gw.get("/api/notifications/inbox").send().await.unwrap()).await;
    assert_eq!(inbox, json!([]));
    let (_, all) = json_of(
        gw.get("/api/notifications/inbox?all=true")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(all[0]["read_at"].is_string(), "{all}");
    let (_, marked) = json_of(gw.post("/api/notifications/read").send().await.unwrap()).await;
    assert_eq!(marked["marked"], 0);
    let (status, _) = error_code(
        gw.post(&format!("/api/notifications/{}/read", uuid::Uuid::nil()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    gw.stop().await;
}

#[tokio::test]
async fn a_refused_fire_is_409_with_the_reason() {
    let gw = TestGateway::start().await;
    // Disabled.
    let mut off = reminder("off");
    off["enabled"] = json!(false);
    gw.post("/api/routines").json(&off).send().await.unwrap();
    let response = gw.post("/api/routines/off/fire").send().await.unwrap();
    let (status, body) = json_of(response).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("disabled"),
        "{body}"
    );

    // Held back by its concurrency limit while its first run waits on the model.
    gw.llm
        .push(Scripted::text("ROUTINE_OK").with_delay(Duration::from_secs(30)));
    gw.post("/api/routines")
        .json(&json!({
            "name": "slow",
            "trigger": {"type": "manual"},
            "action": {"type": "lightweight", "prompt": "think"},
            "guardrails": {"max_concurrent": 1}
        }))
        .send()
        .await
        .unwrap();
    let (status, first) = json_of(gw.post("/api/routines/slow/fire").send().await.unwrap()).await;
    assert_eq!(status, 202, "{first}");
    let (status, body) = json_of(gw.post("/api/routines/slow/fire").send().await.unwrap()).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "conflict");
    assert!(body["error"]["details"]["reason"].is_string(), "{body}");
    assert!(body["error"]["details"]["run_id"].is_string(), "{body}");

    let (status, code) = error_code(
        gw.post("/api/routines/slow/fire")
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "bad_request"));
    let (status, _) = error_code(gw.post("/api/routines/nope/fire").send().await.unwrap()).await;
    assert_eq!(status, 404);
    gw.stop().await;
}
