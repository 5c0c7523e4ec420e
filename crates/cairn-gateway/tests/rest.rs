//! The REST API: routines (CRUD, validation, fire, runs), notifications,
//! sessions, jobs and status, and the bearer token on every route.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};

use cairn_agent::chat::{ChatSink, Inbound};
use cairn_llm::testing::Scripted;
use serde_json::{Value, json};
use support::{TestGateway, error_code};

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

#[tokio::test]
async fn a_chat_turn_shows_in_sessions_and_its_thread_history() {
    let gw = TestGateway::start().await;
    gw.llm.push(Scripted::text("hello back"));
    gw.chat
        .handle(
            Inbound {
                user_id: "ada".into(),
                channel: "api-test".into(),
                thread: None,
                text: "hi there".into(),
                images: Vec::new(),
            },
            &Quiet,
        )
        .await;

    let (status, sessions) = json_of(gw.get("/api/sessions").send().await.unwrap()).await;
    assert_eq!(status, 200, "{sessions}");
    let session = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["channel"] == "api-test")
        .unwrap_or_else(|| panic!("{sessions}"));
    let thread = &session["threads"][0];
    let path = format!(
        "/api/sessions/{}/threads/{}",
        session["id"].as_str().unwrap(),
        thread["id"].as_str().unwrap()
    );
    let (status, history) = json_of(gw.get(&path).send().await.unwrap()).await;
    assert_eq!(status, 200, "{history}");
    let turn = &history["turns"][0];
    assert_eq!(turn["user_input"], "hi there");
    assert_eq!(turn["response"], "hello back");
    assert_eq!(turn["state"], "completed");
    assert!(turn["started_at"].is_string());
    assert!(turn["tool_calls"].is_array());

    // A thread under another session, or not a UUID, is not found.
    let other = format!(
        "/api/sessions/{}/threads/{}",
        uuid::Uuid::nil(),
        thread["id"].as_str().unwrap()
    );
    let (status, _) = error_code(gw.get(&other).send().await.unwrap()).await;
    assert_eq!(status, 404);
    let (status, _) = error_code(gw.get("/api/sessions/x/threads/y").send().await.unwrap()).await;
    assert_eq!(status, 404);
    gw.stop().await;
}

#[tokio::test]
async fn jobs_are_503_without_a_scheduler() {
    let gw = TestGateway::start().await;
    for path in ["/api/jobs", &format!("/api/jobs/{}", uuid::Uuid::nil())] {
        let (status, code) = error_code(gw.get(path).send().await.unwrap()).await;
        assert_eq!((status, code.as_str()), (503, "unavailable"), "{path}");
    }
    let (status, _) = error_code(
        gw.post(&format!("/api/jobs/{}/cancel", uuid::Uuid::nil()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 503);
    gw.stop().await;
}

#[tokio::test]
async fn jobs_are_listed_read_and_cancelled() {
    let jobs = support::jobs::Jobs::new().await;
    let mut scheduler = None;
    let gw = TestGateway::start_with(support::settings(), |g| {
        let (g, s) = jobs.attach(g);
        scheduler = Some(s);
        g
    })
    .await;
    let scheduler = scheduler.unwrap();
    jobs.llm.push(Scripted::text("the summary"));
    let done = scheduler
        .submit(cairn_agent::JobSpec::new(
            "summarise",
            "summarise the inbox",
            "ada",
        ))
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();

    let (status, list) = json_of(gw.get("/api/jobs").send().await.unwrap()).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list[0]["id"], done.id.to_string());
    assert_eq!(list[0]["state"], "completed");
    assert_eq!(list[0]["result"], "the summary");
    let (_, none) = json_of(gw.get("/api/jobs?state=failed").send().await.unwrap()).await;
    assert_eq!(none, json!([]));
    let (status, one) = json_of(
        gw.get(&format!("/api/jobs/{}", done.id))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, one["title"].as_str()), (200, Some("summarise")));

    // A running job is asked to stop; an ended one is left as it is.
    jobs.llm
        .push(Scripted::text("late").with_delay(Duration::from_secs(30)));
    let running = scheduler
        .submit(cairn_agent::JobSpec::new("slow", "take your time", "ada"))
        .await
        .unwrap();
    let (status, cancelled) = json_of(
        gw.post(&format!("/api/jobs/{}/cancel", running.id()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{cancelled}");
    assert!(
        ["requested", "cancelled"].contains(&cancelled["outcome"].as_str().unwrap()),
        "{cancelled}"
    );
    let ended = running.wait().await.unwrap();
    assert_eq!(ended.state.as_str(), "cancelled");
    let (_, again) = json_of(
        gw.post(&format!("/api/jobs/{}/cancel", done.id))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(again["outcome"], "already_ended");
    assert_eq!(again["state"], "completed");

    for path in [
        format!("/api/jobs/{}", uuid::Uuid::nil()),
        "/api/jobs/not-a-uuid".to_string(),
    ] {
        let (status, code) = error_code(gw.get(&path).send().await.unwrap()).await;
        assert_eq!((status, code.as_str()), (404, "not_found"), "{path}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn status_reports_version_database_components_and_counts() {
    let components = std::sync::Arc::new(cairn_gateway::Components::new());
    components.set(
        "routine_engine",
        cairn_gateway::ComponentState::Running,
        chrono::Utc::now(),
        None,
    );
    let gw = TestGateway::start_with(support::settings(), {
        let components = components.clone();
        move |g| g.with_components(components)
    })
    .await;
    gw.post("/api/routines")
        .json(&reminder("one"))
        .send()
        .await
        .unwrap();
    let mut off = reminder("two");
    off["enabled"] = json!(false);
    gw.post("/api/routines").json(&off).send().await.unwrap();

    let (status, body) = json_of(gw.get("/api/status").send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["database"], "sqlite");
    assert_eq!(body["model"], "fake-model");
    assert!(body["uptime_secs"].is_u64());
    assert_eq!(body["components"]["routine_engine"]["state"], "running");
    assert_eq!(body["counts"]["routines"], 2);
    assert_eq!(body["counts"]["enabled_routines"], 1);
    assert_eq!(body["counts"]["pending_notifications"], 0);
    gw.stop().await;
}

#[tokio::test]
async fn every_route_needs_the_token() {
    // Each route's requests come from their own client (a trusted
    // X-Forwarded-For), so the per-client auth-failure limit (429) stays out
    // of the way of what this test checks.
    let mut settings = support::settings();
    settings.trust_forwarded_for = true;
    let gw = TestGateway::start_with(settings, |g| g).await;
    let id = uuid::Uuid::nil();
    let routes = [
        ("GET", "/api/routines".to_string()),
        ("POST", "/api/routines".to_string()),
        ("GET", "/api/routines/x".to_string()),
        ("PUT", "/api/routines/x".to_string()),
        ("DELETE", "/api/routines/x".to_string()),
        ("POST", "/api/routines/x/fire".to_string()),
        ("GET", "/api/routines/x/runs".to_string()),
        ("POST", "/api/routines/x/pause".to_string()),
        ("POST", "/api/routines/x/resume".to_string()),
        ("POST", "/api/routines/x/backfill".to_string()),
        ("GET", "/api/routines/x/next".to_string()),
        ("GET", "/api/notifications".to_string()),
        ("GET", "/api/notifications/inbox".to_string()),
        ("POST", "/api/notifications/read".to_string()),
        ("POST", format!("/api/notifications/{id}/read")),
        ("GET", "/api/sessions".to_string()),
        ("GET", format!("/api/sessions/{id}/threads/{id}")),
        ("GET", "/api/jobs".to_string()),
        ("GET", format!("/api/jobs/{id}")),
        ("POST", format!("/api/jobs/{id}/cancel")),
        ("GET", "/api/status".to_string()),
    ];
    // The table covers every authenticated path the document lists.
    let doc: Value = gw
        .http
        .get(gw.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let mine = [
            "/api/routines",
            "/api/notifications",
            "/api/sessions",
            "/api/jobs",
            "/api/status",
        ]
        .iter()
        .any(|p| path.starts_with(p));
        if mine {
            for (method, op) in item.as_object().unwrap() {
                assert!(op["security"].is_array(), "{method} {path} has no security");
                operations += 1;
            }
        }
    }
    assert_eq!(operations, routes.len(), "the table misses a route");
    for (client, (method, path)) in routes.iter().enumerate() {
        for token in [None, Some("cairn_wrong")] {
            let mut request = gw
                .http
                .request(method.parse().unwrap(), gw.url(path))
                .header("x-forwarded-for", format!("10.0.0.{client}"))
                .json(&reminder("x"));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let (status, code) = error_code(request.send().await.unwrap()).await;
            assert_eq!(
                (status, code.as_str()),
                (401, "unauthorized"),
                "{method} {path}"
            );
        }
    }
    assert!(gw.store.list_routines(None).await.unwrap().is_empty());
    gw.stop().await;
}
