//! `/models`: the provider's list (its `GET /v1/models`), the session's model
//! marked, and what the person reads when the provider cannot answer.

use std::time::Duration;

use cairn_agent::chat::Reply;
use cairn_llm::ModelInfo;
use cairn_llm::testing::FAKE_MODEL;

use crate::harness::{Harness, Wire, notice};

#[tokio::test]
async fn lists_the_providers_models_and_marks_the_sessions() {
    let h = Harness::new().await;
    h.server.set_models(
        vec![
            ModelInfo::new("qwen2.5:7b"),
            ModelInfo::new(FAKE_MODEL),
            ModelInfo::new("llama3.1:8b"),
        ],
        None,
    );
    let text = h.say("/models").await;
    assert_eq!(
        notice(&text),
        format!(
            "Models of openai (* this session's; /model NAME switches):\n* {FAKE_MODEL}\n  llama3.1:8b\n  qwen2.5:7b"
        )
    );
    let request = h.server.last_request().unwrap();
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("GET", "/v1/models")
    );

    h.say("/model qwen2.5:7b").await;
    let text = h.say("/models").await;
    assert!(notice(&text).contains("\n* qwen2.5:7b"), "{text:?}");
    assert!(
        notice(&text).contains(&format!("\n  {FAKE_MODEL}")),
        "{text:?}"
    );

    // A model the provider does not list is still shown as this session's.
    h.say("/model my-finetune").await;
    let text = h.say("/models").await;
    assert!(
        notice(&text).ends_with("* my-finetune  (this session's, not in the provider's list)"),
        "{text:?}"
    );
    assert!(!notice(&text).contains("* qwen"), "{text:?}");
}

#[tokio::test]
async fn anthropic_display_names_are_shown_beside_the_ids() {
    let h = Harness::build(Wire::Anthropic, Duration::from_secs(120)).await;
    h.server.set_models(
        vec![
            ModelInfo {
                id: "claude-b".into(),
                display_name: Some("Claude B".into()),
            },
            ModelInfo {
                id: FAKE_MODEL.into(),
                display_name: Some(FAKE_MODEL.into()),
            },
        ],
        Some(1),
    );
    let text = h.say("/models").await;
    assert_eq!(
        notice(&text),
        format!(
            "Models of anthropic (* this session's; /model NAME switches):\n  claude-b  (Claude B)\n* {FAKE_MODEL}"
        )
    );
}

#[tokio::test]
async fn a_provider_error_is_said_with_the_current_model() {
    let h = Harness::new().await;
    h.server.fail_models(401, "Incorrect API key provided");
    match h.say("/models").await {
        Reply::Error { text } => {
            assert!(
                text.starts_with(
                    "Could not list the models: openai rejected the credentials (HTTP 401)"
                ),
                "{text}"
            );
            assert!(text.contains("Incorrect API key provided"), "{text}");
            assert!(
                text.ends_with(&format!("This session's model: {FAKE_MODEL}.")),
                "{text}"
            );
        }
        other => panic!("expected an error, got {other:?}"),
    }
    h.server.set_models(Vec::new(), None);
    assert_eq!(
        notice(&h.say("/models").await),
        format!("openai lists no models. This session's model: {FAKE_MODEL}.")
    );
}
