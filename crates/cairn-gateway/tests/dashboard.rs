//! The dashboard's page, its sign-in by pairing code, the session cookie
//! and its CSRF and Origin checks, sign-out and revocation, and that the
//! bearer-token API is unchanged by any of it.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use serde_json::{Value, json};
use support::{TestGateway, error_code};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// A signed-in browser: the cookie it holds and the CSRF token it read.
struct Browser {
    cookie: String,
    csrf: String,
    name: String,
}

async fn sign_in(gw: &TestGateway) -> Browser {
    let code = gw.pairing_code().await;
    let response = gw
        .http
        .post(gw.url("/ui/session"))
        .header("Origin", &gw.base)
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let set = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(set.starts_with("cairn_session=cairn_"), "{set}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set} lacks {attribute}");
    }
    let cookie = set.split(';').next().unwrap().to_string();
    let body: Value = response.json().await.unwrap();
    Browser {
        cookie,
        csrf: body["csrf"].as_str().unwrap().to_string(),
        name: body["name"].as_str().unwrap().to_string(),
    }
}

fn routine(name: &str) -> Value {
    json!({"name": name, "trigger": {"type": "manual"}, "action": {"type": "notification", "message": "hi"}})
}

#[tokio::test]
async fn the_page_is_served_with_a_strict_content_security_policy() {
    let gw = TestGateway::start().await;
    let page = gw.http.get(gw.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("default-src 'self'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="/ui/assets/js/app.js">"#));
    let script = gw
        .http
        .get(gw.url("/ui/assets/js/app.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), 200);
    assert!(
        script.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    let missing = gw
        .http
        .get(gw.url("/ui/assets/nope.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // Without a session the data is refused.
    let (status, _) = error_code(gw.http.get(gw.url("/ui/session")).send().await.unwrap()).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_pairing_code_signs_in_and_the_session_is_a_listed_token() {
    let gw = TestGateway::start().await;
    let browser = sign_in(&gw).await;
    let tokens = gw.store.list_api_tokens().await.unwrap();
    let session = tokens.iter().find(|t| t.name == browser.name).unwrap();
    assert_eq!(session.origin, "dashboard");
    assert!(session.name.starts_with("dashboard-"));
    // The store has its hash, never the token itself.
    let token = browser.cookie.trim_start_matches("cairn_session=");
    assert_eq!(session.token_hash, cairn_gateway::auth::hash_secret(token));

    let me: Value = gw
        .http
        .get(gw.url("/ui/session"))
        .header("Cookie", &browser.cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["csrf"], browser.csrf.as_str());
    let routines = gw
        .http
        .get(gw.url("/api/routines"))
        .header("Cookie", &browser.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(routines.status(), 200);
}

#[tokio::test]
async fn a_cookie_request_that_changes_state_needs_the_csrf_token_and_our_origin() {
    let gw = TestGateway::start().await;
    let browser = sign_in(&gw).await;
    let create = |csrf: Option<&str>, origin: Option<&str>, name: &str| {
        let mut request = gw
            .http
            .post(gw.url("/api/routines"))
            .header("Cookie", &browser.cookie)
            .json(&routine(name));
        if let Some(csrf) = csrf {
            request = request.header("X-CSRF-Token", csrf);
        }
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        request.send()
    };
    let (status, code) = error_code(create(None, Some(&gw.base), "a").await.unwrap()).await;
    assert_eq!((status, code.as_str()), (403, "csrf"));
    let (status, code) = error_code(
        create(Some("0".repeat(64).as_str()), Some(&gw.base), "a")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (403, "csrf"));
    let (status, code) = error_code(
        create(Some(&browser.csrf), Some("http://evil.example"), "a")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (403, "cross_origin"));
    let (status, code) = error_code(create(Some(&browser.csrf), None, "a").await.unwrap()).await;
    assert_eq!((status, code.as_str()), (403, "cross_origin"));
    // Reads from another origin are refused too.
    let (status, _) = error_code(
        gw.http
            .get(gw.url("/api/routines"))
            .header("Cookie", &browser.cookie)
            .header("Origin", "http://evil.example")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403);
    assert!(gw.store.list_routines(None).await.unwrap().is_empty());

    let made = create(Some(&browser.csrf), Some(&gw.base), "ok")
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    // Another session's CSRF token does not fit this one.
    let other = sign_in(&gw).await;
    let (status, _) = error_code(
        create(Some(&other.csrf), Some(&gw.base), "b")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn the_bearer_api_is_unchanged_by_cookies() {
    let gw = TestGateway::start().await;
    let browser = sign_in(&gw).await;
    // A bearer request needs no CSRF token or Origin, even beside a cookie.
    let made = gw
        .post("/api/routines")
        .header("Cookie", &browser.cookie)
        .header("Origin", "http://evil.example")
        .json(&routine("by-bearer"))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    // A wrong bearer token is not rescued by a valid cookie.
    let refused = gw
        .http
        .get(gw.url("/api/routines"))
        .bearer_auth("cairn_wrong")
        .header("Cookie", &browser.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
}

#[tokio::test]
async fn sign_in_from_another_origin_or_with_a_wrong_code_is_refused() {
    let gw = TestGateway::start().await;
    let code = gw.pairing_code().await;
    let refused = gw
        .http
        .post(gw.url("/ui/session"))
        .header("Origin", "http://evil.example")
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap();
    let (status, error) = error_code(refused).await;
    assert_eq!((status, error.as_str()), (403, "cross_origin"));
    let wrong = gw
        .http
        .post(gw.url("/ui/session"))
        .header("Origin", &gw.base)
        .json(&json!({"code": "AAAAA-AAAAA"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    // The code refused for its origin was not spent.
    let ok = gw
        .http
        .post(gw.url("/ui/session"))
        .header("Origin", &gw.base)
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn a_revoked_session_is_refused_and_sign_out_revokes() {
    let gw = TestGateway::start().await;
    let get = |cookie: String| {
        gw.http
            .get(gw.url("/api/routines"))
            .header("Cookie", cookie)
            .send()
    };
    let revoked = sign_in(&gw).await;
    assert!(
        gw.store
            .revoke_api_token(&revoked.name, chrono::Utc::now())
            .await
            .unwrap()
    );
    assert_eq!(get(revoked.cookie.clone()).await.unwrap().status(), 401);

    let browser = sign_in(&gw).await;
    assert_eq!(get(browser.cookie.clone()).await.unwrap().status(), 200);
    let without_csrf = gw
        .http
        .delete(gw.url("/ui/session"))
        .header("Cookie", &browser.cookie)
        .header("Origin", &gw.base)
        .send()
        .await
        .unwrap();
    assert_eq!(without_csrf.status(), 403);
    let out = gw
        .http
        .delete(gw.url("/ui/session"))
        .header("Cookie", &browser.cookie)
        .header("Origin", &gw.base)
        .header("X-CSRF-Token", &browser.csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    let cleared = out.headers()["set-cookie"].to_str().unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    assert_eq!(get(browser.cookie.clone()).await.unwrap().status(), 401);
    let tokens = gw.store.list_api_tokens().await.unwrap();
    let record = tokens.iter().find(|t| t.name == browser.name).unwrap();
    assert!(record.revoked_at.is_some());
}

#[tokio::test]
async fn a_websocket_with_the_cookie_must_come_from_our_origin() {
    let gw = TestGateway::start().await;
    let browser = sign_in(&gw).await;
    let url = format!("{}/ws/chat", gw.base.replace("http://", "ws://"));
    let request = |origin: &str| {
        let mut request = url.as_str().into_client_request().unwrap();
        let headers = request.headers_mut();
        headers.insert("Cookie", HeaderValue::from_str(&browser.cookie).unwrap());
        headers.insert("Origin", HeaderValue::from_str(origin).unwrap());
        request
    };
    let refused = tokio_tungstenite::connect_async(request("http://evil.example")).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 403);
        }
        other => panic!("expected a 403, got {other:?}"),
    }
    let (mut socket, _) = tokio_tungstenite::connect_async(request(&gw.base))
        .await
        .unwrap();
    use futures::StreamExt;
    let ready = socket.next().await.unwrap().unwrap();
    let ready: Value = serde_json::from_str(ready.to_text().unwrap()).unwrap();
    assert_eq!(ready["type"], "ready");
}

#[tokio::test]
async fn the_schedule_preview_explains_a_human_phrase() {
    let gw = TestGateway::start().await;
    let preview: Value = gw
        .get("/ui/api/schedule?expr=every%20day%20at%209am&tz=UTC")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let next = preview["next"].as_array().unwrap();
    assert_eq!(next.len(), 5);
    assert!(
        next.iter()
            .all(|t| t["local"].as_str().unwrap().ends_with("09:00")),
        "{preview}"
    );
    let (status, _) = error_code(
        gw.get("/ui/api/schedule?expr=every%20blursday")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422);
}

#[tokio::test]
async fn memory_can_be_added_searched_and_forgotten() {
    let gw = TestGateway::start().await;
    let added: Value = gw
        .post("/ui/api/memory")
        .json(&json!({"text": "My phone is a Pixel 8", "key": "phone"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(added["category"], "core");
    let found: Value = gw
        .get("/ui/api/memory?q=phone")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let hit = &found["hits"][0];
    assert_eq!(hit["id"], added["id"]);
    assert_eq!(hit["matched_by"], "keyword");
    assert!(hit["score"].as_f64().unwrap() > 0.0, "{found}");
    assert_eq!(found["mode"], "keyword_only");
    let path = format!("/ui/api/memory/{}", added["id"].as_str().unwrap());
    let forget = || gw.http.delete(gw.url(&path)).bearer_auth(&gw.token).send();
    assert_eq!(forget().await.unwrap().status(), 200);
    assert_eq!(forget().await.unwrap().status(), 404);
    let (status, _) = error_code(
        gw.post("/ui/api/memory")
            .json(&json!({"text": "  "}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422);
}

#[tokio::test]
async fn costs_yaml_and_retry_answer_for_the_pages() {
    let gw = TestGateway::start().await;
    let now = chrono::Utc::now();
    gw.store.add_llm_spend(900, now).await.unwrap();
    gw.store.add_model_spend("m", 900, now).await.unwrap();
    gw.store
        .add_agent_spend("family", 300, true, now)
        .await
        .unwrap();
    gw.store
        .add_agent_spend("main", 600, true, now)
        .await
        .unwrap();
    let costs: Value = gw
        .get("/ui/api/costs")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let days = costs["days"].as_array().unwrap();
    assert_eq!(days.len(), 30);
    assert_eq!(days[29]["day"], now.date_naive().to_string());
    assert_eq!(days[29]["spent_micros"], 900);
    assert_eq!(costs["models"][0]["model"], "m");
    assert_eq!(costs["today"]["spent_micros"], 900);
    let agents: Vec<_> = costs["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["agent"].as_str().unwrap(),
                a["spent_micros"].as_u64().unwrap(),
                a["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(agents, [("family", 300, 1), ("main", 600, 1)]);
    assert_eq!(costs["agents"][0]["day"], now.date_naive().to_string());
    assert!(costs["limits"].is_null(), "no cost guard in this gateway");

    let made = gw
        .post("/api/routines")
        .json(&routine("in-yaml"))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    let yaml = gw
        .get("/ui/api/routines/in-yaml/yaml")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        yaml.contains("name: in-yaml") && yaml.contains("type: manual"),
        "{yaml}"
    );

    // No channel: the notification is kept in the inbox, not pending.
    let kept = gw
        .notifier
        .send(
            cairn_core::notification::NewNotification {
                user_id: "ada".into(),
                channel: None,
                title: "t".into(),
                body: "b".into(),
                priority: cairn_core::notification::Priority::Normal,
                tags: vec![],
                data: None,
                source: "test".into(),
            },
            now,
        )
        .await
        .unwrap();
    let (status, _) = error_code(
        gw.post(&format!("/ui/api/notifications/{}/retry", kept.id))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = error_code(
        gw.post("/ui/api/notifications/nope/retry")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_component_change_reaches_the_event_stream() {
    let components = std::sync::Arc::new(cairn_gateway::Components::new());
    let gw = TestGateway::start_with(support::settings(), {
        let components = std::sync::Arc::clone(&components);
        move |g| {
            let g = g.with_components(components);
            g.spawn_event_feeds();
            g
        }
    })
    .await;
    let mut stream = gw.get("/api/events").send().await.unwrap();
    assert_eq!(stream.status(), 200);
    let now = chrono::Utc::now();
    components.set(
        "routine engine",
        cairn_gateway::ComponentState::BackingOff,
        now,
        Some("database is locked".into()),
    );
    // A change of time alone (no state, restarts or error) is not news.
    components.update("routine engine", now, |h| h.last_success = Some(now));
    let mut seen = String::new();
    let mut next = async || {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                if let Some(at) = seen.find("component.changed") {
                    let start = seen[..at].rfind("data:").unwrap();
                    let end = at + seen[at..].find('\n').unwrap();
                    let line = seen[start + 5..end].trim().to_string();
                    seen.drain(..end);
                    return serde_json::from_str::<Value>(&line).unwrap();
                }
                let chunk = stream.chunk().await.unwrap().unwrap();
                seen.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        })
        .await
        .expect("a component.changed event")
    };
    let event = next().await;
    assert_eq!(event["component"], "routine engine");
    assert_eq!(event["state"], "backing_off");
    assert_eq!(event["last_error"], "database is locked");
    // The next event is the next real change, not the time-only update.
    components.set(
        "routine engine",
        cairn_gateway::ComponentState::Running,
        chrono::Utc::now(),
        None,
    );
    let event = next().await;
    assert_eq!(event["state"], "running");
    assert!(event["last_error"].is_null());
}
