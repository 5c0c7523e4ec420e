//! The REST API beyond routines: sessions and their thread history, jobs,
//! status, and the bearer token every route needs.

use super::*;

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
