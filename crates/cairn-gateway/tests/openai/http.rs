//! What every `/v1` answer carries: OpenAI's error shape, a request id, CORS.

use cairn_llm::testing::Scripted;
use serde_json::{Value, json};

use crate::support::TestGateway;

#[tokio::test]
async fn every_v1_error_has_openais_shape_and_every_answer_a_request_id() {
    let gw = TestGateway::start().await;
    let raw = |path: &str| gw.http.post(gw.url(path)).bearer_auth(&gw.token);
    let cases = [
        (
            gw.http
                .post(gw.url("/v1/chat/completions"))
                .bearer_auth("cairn_wrong")
                .json(&json!({})),
            401,
            "authentication_error",
            Value::Null,
        ),
        (
            gw.http
                .post(gw.url("/v1/chat/completions"))
                .json(&json!({})),
            401,
            "authentication_error",
            Value::Null,
        ),
        (
            raw("/v1/nowhere").json(&json!({})),
            404,
            "not_found_error",
            Value::Null,
        ),
        (
            raw("/v1/chat/completions").body("{}"),
            415,
            "invalid_request_error",
            Value::Null,
        ),
        (
            raw("/v1/chat/completions")
                .header("content-type", "application/json")
                .body("{not json"),
            400,
            "invalid_request_error",
            Value::Null,
        ),
        (
            raw("/v1/chat/completions").json(&json!({"model": "cairn"})),
            422,
            "invalid_request_error",
            json!("messages"),
        ),
    ];
    for (request, status, kind, param) in cases {
        let response = request
            .header("x-request-id", "client-id-1")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status);
        assert_eq!(response.headers()["x-request-id"], "client-id-1");
        let body: Value = response.json().await.unwrap();
        let error = &body["error"];
        assert_eq!(error["type"], kind, "{body}");
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        assert!(
            error.get("code").is_some() && error.get("param").is_some(),
            "{body}"
        );
        assert_eq!(error["param"], param, "{body}");
    }
    // Outside /v1 the gateway's own shape stays; a fresh id when none is sent.
    let response = gw.get("/api/nowhere").send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert!(
        response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .starts_with("req_")
    );
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].get("type").is_none());
    assert_eq!(body["error"]["code"], "not_found");

    // Provider errors: a rate limit is 429 rate_limit_error, others 502 server_error.
    gw.llm.push(Scripted::rate_limited(None));
    gw.llm.push(Scripted::rate_limited(None));
    gw.llm.push(Scripted::rate_limited(None));
    gw.llm.push(Scripted::rate_limited(None));
    let response = gw
        .post("/v1/chat/completions")
        .json(&json!({"model": "cairn", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (status.as_u16(), &body["error"]["type"]),
        (429, &json!("rate_limit_error")),
        "{body}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn cors_answers_listed_origins_and_nothing_for_others() {
    let mut settings = crate::support::settings();
    settings.cors_origins = vec!["https://app.example".into()];
    let gw = TestGateway::start_with(settings, |g| g).await;
    let preflight = |origin: &str| {
        gw.http
            .request(reqwest::Method::OPTIONS, gw.url("/v1/chat/completions"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
    };
    let allowed = preflight("https://app.example").await.unwrap();
    assert_eq!(allowed.status(), 204);
    let h = allowed.headers();
    assert_eq!(h["access-control-allow-origin"], "https://app.example");
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    assert_eq!(
        h["access-control-allow-headers"],
        "authorization, content-type"
    );
    assert_eq!(h["vary"], "Origin");

    let refused = preflight("https://evil.example").await.unwrap();
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
    assert!(
        refused
            .headers()
            .get("access-control-allow-methods")
            .is_none()
    );

    // The real request: the listed origin may read the answer, the other not.
    for (origin, allowed) in [
        ("https://app.example", true),
        ("https://evil.example", false),
    ] {
        let response = gw
            .get("/v1/models")
            .header("origin", origin)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let header = response.headers().get("access-control-allow-origin");
        assert_eq!(header.is_some(), allowed, "{origin}");
        if allowed {
            assert!(
                response.headers()["access-control-expose-headers"]
                    .to_str()
                    .unwrap()
                    .contains("x-request-id")
            );
        }
    }
    gw.stop().await;
}
