//! `list_models`: the provider's `GET /v1/models` in both protocols, paging,
//! errors, retries, failover, and the default for providers that cannot list.

use std::sync::Arc;

use cairn_llm::testing::{FAKE_API_KEY, FAKE_MODEL, InstantProvider, Protocol};
use cairn_llm::{FailoverProvider, LlmError, LlmErrorKind, LlmProvider, ModelInfo};

use crate::common::*;

fn ids(models: &[ModelInfo]) -> Vec<&str> {
    models.iter().map(|m| m.id.as_str()).collect()
}

#[tokio::test]
async fn openai_compatible_servers_list_every_model_at_once() {
    let server = server().await;
    let llm = provider(&server, Protocol::OpenAi);
    assert_eq!(ids(&llm.list_models().await.unwrap()), [FAKE_MODEL]);
    server.set_models(
        vec![ModelInfo::new("llama3.1:8b"), ModelInfo::new("qwen2.5:7b")],
        Some(1),
    );
    let models = llm.list_models().await.unwrap();
    assert_eq!(ids(&models), ["llama3.1:8b", "qwen2.5:7b"]);
    assert_eq!(models[0].display_name, None);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].method, "GET");
    assert_eq!(requests[1].path, "/v1/models");
    let bearer = format!("Bearer {FAKE_API_KEY}");
    assert_eq!(requests[1].header("authorization"), Some(bearer.as_str()));
}

#[tokio::test]
async fn anthropic_lists_are_followed_page_by_page() {
    let server = server().await;
    let models: Vec<ModelInfo> = (1..=5)
        .map(|n| ModelInfo {
            id: format!("claude-{n}"),
            display_name: Some(format!("Claude {n}")),
        })
        .collect();
    server.set_models(models.clone(), Some(2));
    let listed = provider(&server, Protocol::Anthropic)
        .list_models()
        .await
        .unwrap();
    assert_eq!(listed, models);
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/v1/models?limit=1000",
            "/v1/models?after_id=claude-2&limit=1000",
            "/v1/models?after_id=claude-4&limit=1000",
        ]
    );
    let first = &server.requests()[0];
    assert_eq!(first.header("x-api-key"), Some(FAKE_API_KEY));
    assert!(first.header("anthropic-version").is_some());
}

#[tokio::test]
async fn errors_say_what_the_server_said_and_transient_ones_are_retried() {
    for protocol in BOTH {
        let server = server().await;
        let llm = provider(&server, protocol);
        server.fail_models(401, "invalid x-api-key");
        let error = llm.list_models().await.unwrap_err();
        assert_eq!(error.kind(), LlmErrorKind::Auth, "{protocol:?}");
        assert!(error.to_string().contains("invalid x-api-key"), "{error}");
        assert_eq!(server.requests().len(), 1, "auth errors are not retried");

        server.reset();
        server.fail_models(404, "no such route: /v1/models");
        let error = llm.list_models().await.unwrap_err();
        assert_eq!(error.kind(), LlmErrorKind::BadRequest);
        assert!(error.to_string().contains("HTTP 404"), "{error}");

        server.reset();
        server.fail_models(503, "loading the model");
        let error = llm.list_models().await.unwrap_err();
        assert_eq!(error.kind(), LlmErrorKind::Server);
        assert_eq!(server.requests().len(), 3, "two retries, then the error");
    }
}

#[tokio::test]
async fn a_failover_chain_lists_its_primary_and_others_say_they_cannot() {
    let server = server().await;
    server.set_models(vec![ModelInfo::new("primary-model")], None);
    let chain = FailoverProvider::new(vec![
        provider(&server, Protocol::OpenAi),
        Arc::new(InstantProvider::new()) as Arc<dyn LlmProvider>,
    ])
    .unwrap();
    assert_eq!(ids(&chain.list_models().await.unwrap()), ["primary-model"]);

    let instant = InstantProvider::new();
    let error = instant.list_models().await.unwrap_err();
    assert!(matches!(error, LlmError::Unsupported { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!("{} cannot list its models", instant.name())
    );
}
