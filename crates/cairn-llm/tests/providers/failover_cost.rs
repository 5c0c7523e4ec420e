//! Failover, the cheap provider, cost accounting and key secrecy.

use std::sync::Arc;
use std::time::Duration;

use cairn_llm::testing::{FAKE_API_KEY, FAKE_MODEL, FakeLlmServer, Scripted};
use cairn_llm::{
    FailoverProvider, LlmError, LlmProvider, LlmSettings, ModelPrice, PriceTable, ProviderKind,
    ProviderSettings, RetryPolicy, build_provider, build_providers,
};

use crate::common::*;

fn chain(server: &FakeLlmServer) -> LlmSettings {
    LlmSettings {
        primary: server
            .openai_settings()
            .with_name("primary")
            .with_context_window(128_000),
        cheap: None,
        fallbacks: vec![
            server
                .anthropic_settings()
                .with_name("backup")
                .with_context_window(64_000),
        ],
    }
}

#[tokio::test(start_paused = true)]
async fn fails_over_to_the_second_provider_after_retries() {
    let server = server().await;
    for _ in 0..3 {
        server.push(Scripted::server_error(503));
    }
    server.push(Scripted::text("from the backup"));
    let providers = build_providers(&chain(&server)).unwrap();
    assert_eq!(providers.main.name(), "primary");
    assert_eq!(
        providers.main.context_window(),
        Some(64_000),
        "smallest window in the chain"
    );
    let response = providers
        .main
        .complete(&ask("hi").with_model("primary-only-model"))
        .await
        .unwrap();
    assert_eq!(response.text, "from the backup");
    assert_eq!(response.provider, "backup");
    let requests = server.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/messages"
        ]
    );
    assert_eq!(requests[0].body["model"], "primary-only-model");
    assert_eq!(
        requests[3].body["model"], FAKE_MODEL,
        "fallbacks use their own model"
    );
}

#[tokio::test(start_paused = true)]
async fn streams_fail_over_too() {
    let server = server().await;
    for _ in 0..3 {
        server.push(Scripted::rate_limited(Some(1)));
    }
    server.push(Scripted::text("streamed by backup"));
    let providers = build_providers(&chain(&server)).unwrap();
    let (_, response) = collect(providers.main.as_ref(), &ask("hi")).await;
    assert_eq!(response.text, "streamed by backup");
}

#[tokio::test]
async fn no_failover_on_auth_bad_request_or_context_length() {
    for scripted in [
        Scripted::auth_error(),
        Scripted::context_length_exceeded(),
        Scripted::error(400, r#"{"error":{"message":"bad schema"}}"#),
    ] {
        let server = server().await;
        server.push(scripted);
        server.push(Scripted::text("backup must not answer"));
        let providers = build_providers(&chain(&server)).unwrap();
        let error = providers.main.complete(&ask("hi")).await.unwrap_err();
        assert!(!error.should_fail_over(), "{error:?}");
        assert_eq!(server.requests().len(), 1);
        assert_eq!(server.pending(), 1);
    }
}

#[tokio::test]
async fn failover_chain_needs_a_provider() {
    assert!(matches!(
        FailoverProvider::new(Vec::new()),
        Err(LlmError::Config { .. })
    ));
}

#[tokio::test]
async fn cheap_provider_defaults_to_main_or_uses_its_own_model() {
    let server = server().await;
    let providers = build_providers(&LlmSettings::new(server.openai_settings())).unwrap();
    assert!(Arc::ptr_eq(&providers.main, &providers.cheap));

    let mut settings = LlmSettings::new(server.openai_settings());
    settings.cheap = Some(ProviderSettings {
        model: "fake-mini".into(),
        ..server.openai_settings()
    });
    let providers = build_providers(&settings).unwrap();
    assert_eq!(providers.cheap.model(), "fake-mini");
    server.push(Scripted::text("cheap"));
    providers.cheap.complete(&ask("classify")).await.unwrap();
    assert_eq!(server.requests()[0].body["model"], "fake-mini");
}

#[tokio::test]
async fn cost_is_computed_in_integer_micro_dollars() {
    for protocol in BOTH {
        let server = server().await;
        let settings = ProviderSettings {
            model: "gpt-4o-mini".into(),
            prices: PriceTable::builtin(),
            ..settings(&server, protocol)
        };
        server.push(
            Scripted::text("ok")
                .with_usage(1_234_567, 89_012)
                .with_model("gpt-4o-mini-2024-07-18"),
        );
        let response = build_provider(&settings)
            .unwrap()
            .complete(&ask("x"))
            .await
            .unwrap();
        // 1_234_567 × $0.15/M + 89_012 × $0.60/M = 238_592.25 µ$, rounded up.
        assert_eq!(response.cost_micros, 238_593, "{protocol:?}");

        // Overridden price, and an unknown model costing 0.
        let settings = settings.with_prices(
            PriceTable::builtin().with("gpt-4o-mini", ModelPrice::new(1_000_000, 1_000_000)),
        );
        server.push(Scripted::text("ok").with_usage(1000, 1000));
        let response = build_provider(&settings)
            .unwrap()
            .complete(&ask("x"))
            .await
            .unwrap();
        assert_eq!(response.cost_micros, 2000);
        let unknown = ProviderSettings {
            model: "my-local-model".into(),
            ..settings
        };
        server.push(Scripted::text("ok").with_usage(1000, 1000));
        let response = build_provider(&unknown)
            .unwrap()
            .complete(&ask("x"))
            .await
            .unwrap();
        assert_eq!(response.cost_micros, 0);
    }
}

#[tokio::test]
async fn streamed_cost_matches_whole_cost() {
    for protocol in BOTH {
        let server = server().await;
        server.push(Scripted::text("a b c").with_usage(500, 250));
        server.push(Scripted::text("a b c").with_usage(500, 250));
        let llm = provider(&server, protocol);
        let whole = llm.complete(&ask("x")).await.unwrap();
        let (_, streamed) = collect(llm.as_ref(), &ask("x")).await;
        assert_eq!(whole.cost_micros, 500 + 500);
        assert_eq!(streamed.cost_micros, whole.cost_micros);
        assert_eq!(streamed.usage, whole.usage);
    }
}

#[tokio::test]
async fn api_key_never_shows_in_debug_display_or_errors() {
    for protocol in BOTH {
        let server = server().await;
        let settings = settings(&server, protocol).with_retry(RetryPolicy::none());
        assert!(!format!("{settings:?}").contains(FAKE_API_KEY));
        let llm = build_provider(&settings).unwrap();
        assert!(!format!("{llm:?}").contains(FAKE_API_KEY));
        let all = build_providers(&LlmSettings::new(settings.clone())).unwrap();
        assert!(!format!("{all:?}").contains(FAKE_API_KEY));

        // A proxy that echoes the key back in its error body.
        let echo =
            format!(r#"{{"error":{{"message":"invalid key {FAKE_API_KEY} for this org"}}}}"#);
        for status in [401, 400, 500] {
            server.push(Scripted::error(status, echo.clone()));
            let error = llm.complete(&ask("x")).await.unwrap_err();
            for shown in [error.to_string(), format!("{error:?}")] {
                assert!(!shown.contains(FAKE_API_KEY), "{shown}");
                assert!(shown.contains("[REDACTED]"), "{shown}");
            }
        }
    }
}

#[tokio::test]
async fn transport_errors_are_typed_and_keyless() {
    // A port with nothing listening: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let settings = ProviderSettings::new(ProviderKind::OpenAiCompatible, "m")
        .with_base_url(format!(
            "http://user:{FAKE_API_KEY}@127.0.0.1:{port}/v1?key={FAKE_API_KEY}"
        ))
        .with_api_key(FAKE_API_KEY)
        .with_timeout(Some(Duration::from_secs(5)))
        .with_retry(RetryPolicy::none());
    let error = build_provider(&settings)
        .unwrap()
        .complete(&ask("x"))
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::Transport { .. }), "{error:?}");
    assert!(
        !format!("{error} {error:?}").contains(FAKE_API_KEY),
        "{error:?}"
    );
}

#[test]
fn bad_settings_are_config_errors() {
    let missing_key = ProviderSettings::new(ProviderKind::OpenAiCompatible, "gpt-4o");
    let error = build_provider(&missing_key).unwrap_err();
    assert!(
        matches!(error, LlmError::Config { .. }) && error.to_string().contains("api.openai.com")
    );
    let anthropic = ProviderSettings::new(ProviderKind::Anthropic, "claude-sonnet-4");
    assert!(build_provider(&anthropic).is_err());
    let bad_url =
        ProviderSettings::new(ProviderKind::OpenAiCompatible, "m").with_base_url("not a url");
    assert!(matches!(
        build_provider(&bad_url),
        Err(LlmError::Config { .. })
    ));
    let ftp =
        ProviderSettings::new(ProviderKind::OpenAiCompatible, "m").with_base_url("ftp://h/v1");
    assert!(build_provider(&ftp).is_err());
    let empty_model =
        ProviderSettings::new(ProviderKind::OpenAiCompatible, " ").with_base_url("http://h/v1");
    assert!(build_provider(&empty_model).is_err());
    let local = ProviderSettings::preset("ollama", "llama3").unwrap();
    let llm = build_provider(&local).unwrap();
    assert_eq!((llm.name(), llm.model()), ("ollama", "llama3"));
}

#[tokio::test]
async fn instant_provider_answers_without_io() {
    let instant = cairn_llm::testing::InstantProvider::new();
    instant.push_text("first");
    let llm: Arc<dyn LlmProvider> = Arc::new(instant);
    assert_eq!(llm.complete(&ask("a")).await.unwrap().text, "first");
    assert_eq!(llm.complete(&ask("b")).await.unwrap().text, "ok");
    let (_, streamed) = collect(llm.as_ref(), &ask("c")).await;
    assert_eq!(streamed.text, "ok");
}
