//! Error classification, retries and backoff (paused tokio time; no test sleeps for real).

use std::time::Duration;

use cairn_llm::testing::{Protocol, Scripted};
use cairn_llm::{LlmError, RetryPolicy, build_provider};
use futures::StreamExt;
use tokio::time::Instant;

use crate::common::*;

#[tokio::test(start_paused = true)]
async fn rate_limited_then_success_waits_exactly_retry_after() {
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::rate_limited(Some(7)));
        server.push(Scripted::text("after the wait"));
        let started = Instant::now();
        let response = provider(&server, protocol)
            .complete(&ask("hi"))
            .await
            .unwrap();
        assert_eq!(response.text, "after the wait");
        assert_eq!(started.elapsed(), Duration::from_secs(7), "{protocol:?}");
        assert_eq!(server.requests().len(), 2);
    }
}

#[tokio::test(start_paused = true)]
async fn retry_after_as_http_date_is_honoured() {
    let server = server().await;
    let when = chrono::Utc::now() + chrono::Duration::seconds(30);
    server.push(Scripted::rate_limited(None).with_header(
        "retry-after",
        when.format("%a, %d %b %Y %H:%M:%S GMT").to_string(),
    ));
    server.push(Scripted::text("ok"));
    let started = Instant::now();
    provider(&server, Protocol::Anthropic)
        .complete(&ask("hi"))
        .await
        .unwrap();
    // The date has one-second resolution and is compared with the wall clock.
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(28) && waited <= Duration::from_secs(31),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn rate_limit_in_a_stream_request_is_retried_too() {
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::rate_limited(Some(3)));
        server.push(Scripted::text("streamed after wait"));
        let started = Instant::now();
        let llm = provider(&server, protocol);
        let (_, response) = collect(llm.as_ref(), &ask("hi")).await;
        assert_eq!(response.text, "streamed after wait");
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }
}

#[tokio::test(start_paused = true)]
async fn server_errors_are_retried_with_backoff_then_succeed() {
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::server_error(503));
        server.push(Scripted::server_error(529));
        server.push(Scripted::text("recovered"));
        let started = Instant::now();
        let response = provider(&server, protocol)
            .complete(&ask("hi"))
            .await
            .unwrap();
        assert_eq!(response.text, "recovered");
        assert_eq!(server.requests().len(), 3);
        // Backoff 10 ms then 20 ms, each jittered into its upper half.
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(15) && waited <= Duration::from_millis(30),
            "{waited:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn retries_exhausted_returns_the_typed_error() {
    for protocol in BOTH {
        let server = server().await;
        for _ in 0..3 {
            server.push(Scripted::server_error(502));
        }
        server.push(Scripted::text("never reached"));
        let error = provider(&server, protocol)
            .complete(&ask("hi"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LlmError::Server { status: 502, .. }),
            "{error:?}"
        );
        assert!(error.is_retryable());
        assert_eq!(server.requests().len(), 3, "1 attempt + 2 retries");
        assert_eq!(server.pending(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn auth_error_is_not_retried() {
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::auth_error());
        server.push(Scripted::text("never reached"));
        let error = provider(&server, protocol)
            .complete(&ask("hi"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LlmError::Auth { status: 401, .. }),
            "{error:?}"
        );
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn long_retry_after_is_not_waited_out() {
    let server = server().await;
    server.push(Scripted::rate_limited(Some(3600)));
    let started = Instant::now();
    let error = provider(&server, Protocol::OpenAi)
        .complete(&ask("hi"))
        .await
        .unwrap_err();
    assert_eq!(error.retry_after(), Some(Duration::from_secs(3600)));
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn context_length_in_each_providers_phrasing() {
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::context_length_exceeded());
        let error = provider(&server, protocol)
            .complete(&ask("huge"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LlmError::ContextLengthExceeded { .. }),
            "{protocol:?}: {error:?}"
        );
        assert_eq!(server.requests().len(), 1, "not retried");
    }
    let local_servers = [
        // llama.cpp server
        (
            400,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#,
        ),
        // vLLM
        (
            400,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).","type":"BadRequestError","param":null,"code":400}"#,
        ),
        // Ollama
        (
            500,
            r#"{"error":"prompt too long; exceeded max context length by 100 tokens"}"#,
        ),
        // LM Studio
        (
            400,
            r#"{"error":"Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough."}"#,
        ),
    ];
    for (status, body) in local_servers {
        let server = server().await;
        server.push(Scripted::error(status, body));
        let error = provider(&server, Protocol::OpenAi)
            .complete(&ask("huge"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LlmError::ContextLengthExceeded { .. }),
            "{body}: {error:?}"
        );
    }
}

#[tokio::test]
async fn other_4xx_is_a_bad_request() {
    let server = server().await;
    server.push(Scripted::error(404, r#"{"error":{"message":"The model `nope` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#));
    let error = provider(&server, Protocol::OpenAi)
        .complete(&ask("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::BadRequest { status: 404, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("does not exist"));
}

#[tokio::test]
async fn timeouts_are_retried_then_reported() {
    // Real time with a short timeout: a paused clock cannot model a socket wait
    // (it would jump to the timeout at once). Both protocols run concurrently.
    futures::future::join_all(BOTH.map(timeout_case)).await;
}

async fn timeout_case(protocol: Protocol) {
    let server = server().await;
    server.push(Scripted::text("slow").with_delay(Duration::from_secs(30)));
    server.push(Scripted::text("fast"));
    let settings = settings(&server, protocol).with_timeout(Some(Duration::from_secs(1)));
    let llm = build_provider(&settings).expect("builds");
    assert_eq!(
        llm.complete(&ask("hi"))
            .await
            .expect("retried after the timeout")
            .text,
        "fast"
    );

    server.push(Scripted::text("slow").with_delay(Duration::from_secs(30)));
    server.push(Scripted::text("slow").with_delay(Duration::from_secs(30)));
    let llm = build_provider(&settings.with_max_retries(1)).expect("builds");
    let error = llm.complete(&ask("hi")).await.expect_err("times out");
    assert!(
        matches!(error, LlmError::Timeout { .. }),
        "{protocol:?}: {error:?}"
    );
}

#[tokio::test]
async fn stalled_stream_times_out() {
    let server = server().await;
    server.push(Scripted::text("one two three").with_chunk_delay(Duration::from_secs(30)));
    let settings = server
        .openai_settings()
        .with_timeout(Some(Duration::from_secs(1)))
        .with_retry(RetryPolicy::none());
    let llm = build_provider(&settings).unwrap();
    let mut stream = llm.stream(&ask("hi")).await.unwrap();
    let mut saw_timeout = false;
    while let Some(event) = stream.next().await {
        if let Err(error) = event {
            saw_timeout = matches!(error, LlmError::Timeout { .. });
            break;
        }
    }
    assert!(saw_timeout);
}

#[tokio::test]
async fn empty_script_answers_a_clear_500() {
    for protocol in BOTH {
        let server = server().await;
        let settings = settings(&server, protocol).with_retry(RetryPolicy::none());
        let error = build_provider(&settings)
            .unwrap()
            .complete(&ask("hi"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LlmError::Server { status: 500, .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("script ran out"), "{error}");
    }
}

#[tokio::test]
async fn error_events_inside_streams_are_typed() {
    let server = server().await;
    server.push(Scripted::raw_stream(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":1}}}\n\n\
         event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    ));
    server.push(Scripted::raw_stream(
        "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n\
         data: {\"error\":{\"message\":\"upstream died\",\"code\":502}}\n\n",
    ));
    let anthropic = provider(&server, Protocol::Anthropic);
    let results: Vec<_> = anthropic.stream(&ask("x")).await.unwrap().collect().await;
    assert!(
        matches!(results.last(), Some(Err(LlmError::Server { .. }))),
        "{results:?}"
    );
    let openai = provider(&server, Protocol::OpenAi);
    let results: Vec<_> = openai.stream(&ask("x")).await.unwrap().collect().await;
    assert!(
        matches!(results.first(), Some(Ok(cairn_llm::StreamEvent::TextDelta(t))) if t == "par")
    );
    assert!(
        matches!(
            results.last(),
            Some(Err(LlmError::Server { status: 502, .. }))
        ),
        "{results:?}"
    );
}
