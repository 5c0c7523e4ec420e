//! Images in user messages: `image_url` parts for OpenAI-compatible servers,
//! image blocks for Anthropic, and refusals before anything is sent.

use std::sync::Arc;

use cairn_core::image::ImagePart;
use cairn_llm::testing::{Protocol, Scripted};
use cairn_llm::{ChatMessage, ChatRequest, LlmErrorKind, build_provider};
use serde_json::json;

use crate::common::*;

/// A 1×1 GIF.
const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;";

fn image(loaded: bool) -> ImagePart {
    ImagePart {
        media_type: "image/gif".into(),
        sha256: "0".repeat(64),
        data: loaded.then(|| Arc::from(GIF)),
    }
}

fn with_image(loaded: bool) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user_with_images(
        "what is this?",
        vec![image(loaded)],
    )])
}

#[tokio::test]
async fn images_go_out_as_each_protocol_wants_them() {
    let base64 = "R0lGODlhAQABAAAAADs=";
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::text("A pixel."));
        let response = provider(&server, protocol)
            .complete(&with_image(true))
            .await
            .unwrap();
        assert_eq!(response.text, "A pixel.");
        let body = &server.requests()[0].body;
        let content = &body["messages"][0]["content"];
        match protocol {
            Protocol::OpenAi => assert_eq!(
                *content,
                json!([
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": format!("data:image/gif;base64,{base64}")}}
                ])
            ),
            Protocol::Anthropic => assert_eq!(
                *content,
                json!([
                    {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": base64}},
                    {"type": "text", "text": "what is this?"}
                ])
            ),
        }
    }
}

#[tokio::test]
async fn a_model_without_vision_refuses_images_before_sending() {
    for protocol in BOTH {
        let server = server().await;
        let blind = build_provider(&settings(&server, protocol).with_vision(false)).unwrap();
        assert!(!blind.vision());
        let err = blind.complete(&with_image(true)).await.unwrap_err();
        assert_eq!(err.kind(), LlmErrorKind::Config);
        assert!(err.to_string().contains("llm.vision = false"), "{err}");
        let err = blind.stream(&with_image(true)).await.unwrap_err();
        assert!(err.to_string().contains("llm.vision = false"), "{err}");
        assert!(server.requests().is_empty(), "{protocol:?}: nothing sent");
        // Text alone still goes through.
        server.push(Scripted::text("ok"));
        assert_eq!(blind.complete(&ask("hi")).await.unwrap().text, "ok");
    }
}

#[tokio::test]
async fn an_image_never_loaded_is_refused_not_sent_broken() {
    let server = server().await;
    let err = provider(&server, Protocol::OpenAi)
        .complete(&with_image(false))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("was not loaded"), "{err}");
    assert!(server.requests().is_empty());
}
