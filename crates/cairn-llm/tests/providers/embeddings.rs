//! The embeddings client against the fake embeddings server.

use cairn_llm::testing::{FakeEmbeddingsServer, fake_embedding};
use cairn_llm::{EmbeddingsClient, LlmError};

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test]
async fn embeddings_come_back_in_order_with_the_asked_dimensions() {
    let server = FakeEmbeddingsServer::start().await.unwrap();
    let client = EmbeddingsClient::new(&server.settings(Some(256))).unwrap();
    let texts = vec![
        "dentist appointment friday".to_string(),
        "Friday: the dentist".to_string(),
        "gardening tomatoes".to_string(),
    ];
    let vectors = client.embed(&texts).await.unwrap();
    assert_eq!(vectors.len(), 3);
    assert!(vectors.iter().all(|v| v.len() == 256));
    assert_eq!(vectors[0], fake_embedding(&texts[0], 256));
    // Shared words make texts close; none, far.
    assert!(cosine(&vectors[0], &vectors[1]) > 0.6);
    assert!(cosine(&vectors[0], &vectors[2]) < 0.3);
    let body = &server.requests()[0];
    assert_eq!(body["dimensions"], 256);
    assert_eq!(body["input"][2], "gardening tomatoes");
    assert_eq!(server.texts_embedded(), 3);
}

#[tokio::test]
async fn a_failing_server_is_a_typed_error_without_the_key() {
    let server = FakeEmbeddingsServer::start().await.unwrap();
    server.set_failing(true);
    let client = EmbeddingsClient::new(&server.settings(None)).unwrap();
    let err = client.embed_one("x").await.unwrap_err();
    assert!(
        matches!(err, LlmError::Server { status: 500, .. }),
        "{err:?}"
    );
    assert!(!err.to_string().contains(cairn_llm::testing::FAKE_API_KEY));
}
