//! The server itself: binding, health, readiness, error shapes, the body
//! limit, the OpenAPI document and graceful shutdown.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use cairn_core::clock::{Clock, SystemClock};
use cairn_gateway::{BindError, ComponentState};
use serde_json::Value;
use support::{TestGateway, error_code, settings};

#[tokio::test]
async fn healthz_and_readyz_answer() {
    let gw = TestGateway::start().await;
    let alive: Value = gw
        .http
        .get(gw.url("/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(alive["status"], "ok");
    let ready = gw.http.get(gw.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    gw.stop().await;
}

#[tokio::test]
async fn readyz_is_503_while_a_component_is_not_running() {
    let components = std::sync::Arc::new(cairn_gateway::Components::new());
    let now = SystemClock.now();
    components.set("routine_engine", ComponentState::Starting, now, None);
    let gw = TestGateway::start_with(settings(), {
        let components = components.clone();
        move |g| g.with_components(components)
    })
    .await;
    let (status, code) = error_code(gw.http.get(gw.url("/readyz")).send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (503, "unavailable"));
    components.set("routine_engine", ComponentState::Running, now, None);
    assert_eq!(
        gw.http
            .get(gw.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // A component waiting to be restarted is not ready either, and the
    // answer carries its restarts and last error.
    components.update("routine_engine", now, |h| {
        h.state = ComponentState::BackingOff;
        h.restarts = 2;
        h.last_error = Some("panicked: boom".into());
    });
    let answer = gw.http.get(gw.url("/readyz")).send().await.unwrap();
    assert_eq!(answer.status(), 503);
    let body: serde_json::Value = answer.json().await.unwrap();
    let engine = &body["error"]["details"]["components"]["routine_engine"];
    assert_eq!(engine["state"], "backing_off", "{body}");
    assert_eq!(engine["restarts"], 2);
    assert_eq!(engine["last_error"], "panicked: boom");
    gw.stop().await;
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json_errors() {
    let gw = TestGateway::start().await;
    let (status, code) = error_code(gw.http.get(gw.url("/nope")).send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (404, "not_found"));
    let (status, code) = error_code(gw.http.post(gw.url("/healthz")).send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (405, "method_not_allowed"));
    gw.stop().await;
}

#[tokio::test]
async fn the_openapi_document_lists_the_routes() {
    let gw = TestGateway::start().await;
    let doc: Value = gw
        .http
        .get(gw.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{doc}");
    assert!(doc["paths"]["/healthz"]["get"].is_object());
    assert!(doc["paths"]["/readyz"]["get"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    gw.stop().await;
}

#[tokio::test]
async fn a_public_address_needs_permission_and_a_taken_port_is_named() {
    let mut public = settings();
    public.host = "0.0.0.0".into();
    let err = cairn_gateway::bind(&public).await.unwrap_err();
    assert!(matches!(err, BindError::Public(_)), "{err}");
    assert!(err.to_string().contains("allow_public_bind"), "{err}");

    let first = cairn_gateway::bind(&settings()).await.unwrap();
    let mut same = settings();
    same.port = first.local_addr().unwrap().port();
    let err = cairn_gateway::bind(&same).await.unwrap_err();
    assert!(
        err.to_string().contains(&format!("port {}", same.port)),
        "{err}"
    );
    assert!(matches!(err, BindError::InUse { .. }), "{err}");
}
