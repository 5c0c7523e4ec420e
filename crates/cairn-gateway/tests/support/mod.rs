//! A real gateway on 127.0.0.1 for tests: a SQLite store in a temporary
//! directory, the fake LLM server behind the chat service, the routine
//! engine with the real actions, and a bearer token.
#![allow(
    dead_code,
    reason = "not in every build: each test binary uses part of the harness"
)]

pub mod agents;
pub mod clients;
pub mod jobs;

use std::sync::Arc;
use std::time::Duration;

use cairn_agent::chat::ChatService;
use cairn_agent::tools::{Tool, ToolContext};
use cairn_agent::{
    AgentLoop, AutonomyLevel, HookRegistry, LoopConfig, PolicyGate, ToolPolicyConfig, ToolRegistry,
    ToolRunner,
};
use cairn_automation::notify::{ChannelSet, Notifier, NotifySettings};
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::config::GatewayConfig;
use cairn_gateway::pairing::PairingKey;
use cairn_gateway::{Gateway, auth};
use cairn_llm::testing::FakeLlmServer;
use cairn_llm::{LlmProvider, build_provider};
use cairn_store::{NewApiToken, Store};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use cairn_test_support::agent::Writer;

/// Settings for tests: loopback, a free port, the defaults otherwise.
pub fn settings() -> GatewayConfig {
    GatewayConfig {
        enabled: true,
        host: "127.0.0.1".into(),
        port: 0,
        allow_public_bind: false,
        body_limit: 64 * 1024,
        // Room for the images tests send; small enough that a 4 MiB message is far past it.
        image_limit: 1024 * 1024,
        request_timeout: Duration::from_secs(30),
        metrics_public: false,
        trust_forwarded_for: false,
        trusted_proxies: cairn_core::ip_range::IpRange::LOOPBACK
            .iter()
            .map(|r| r.parse().unwrap())
            .collect(),
        token_ttl: Some(Duration::from_secs(30 * 24 * 3600)),
        max_connections: 256,
        header_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
        openai_strict_models: false,
        cors_origins: Vec::new(),
        allowed_hosts: Vec::new(),
        max_images: cairn_core::image::DEFAULT_MAX_IMAGES,
        webhook_secret: None,
    }
}

/// Builds the tools a test gateway registers over its store.
pub type ToolsOver = Box<dyn FnOnce(&Store) -> Vec<Arc<dyn Tool>>>;

/// What a test gateway is built with.
pub struct Options {
    /// The `[gateway]` settings.
    pub settings: GatewayConfig,
    /// `agent.approval_timeout_secs` of its chat service.
    pub approval_timeout: Duration,
    /// The clock every part reads.
    pub clock: Arc<dyn Clock>,
    /// The agent's autonomy.
    pub autonomy: AutonomyLevel,
    /// Tools registered over the store besides [`Writer`].
    pub tools: ToolsOver,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            settings: settings(),
            approval_timeout: Duration::from_secs(120),
            clock: Arc::new(SystemClock),
            autonomy: AutonomyLevel::Supervised,
            tools: Box::new(|_| Vec::new()),
        }
    }
}

/// A running gateway and what it runs on.
pub struct TestGateway {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// A valid bearer token.
    pub token: String,
    pub store: Store,
    pub llm: FakeLlmServer,
    pub engine: RoutineEngine,
    pub notifier: Notifier,
    pub chat: Arc<ChatService>,
    pub writer: Arc<Writer>,
    pub http: reqwest::Client,
    pub shutdown: CancellationToken,
    pub server: tokio::task::JoinHandle<std::io::Result<()>>,
    pub workspace: tempfile::TempDir,
    /// The key the gateway checks pairing codes with.
    pub pairing_key: PairingKey,
    /// Its database, for a store of another "process".
    pub db_url: String,
    _db: tempfile::TempDir,
}

impl TestGateway {
    /// Starts one with the test settings.
    pub async fn start() -> TestGateway {
        Self::start_with(settings(), |g| g).await
    }

    /// Starts one with `settings`, letting `customize` add to the gateway.
    pub async fn start_with(
        settings: GatewayConfig,
        customize: impl FnOnce(Gateway) -> Gateway,
    ) -> TestGateway {
        Self::start_opts(
            Options {
                settings,
                ..Options::default()
            },
            customize,
        )
        .await
    }

    /// Starts one whose agent runs under `autonomy` with the tools `tools`
    /// makes over the store besides [`Writer`].
    pub async fn start_with_agent(
        settings: GatewayConfig,
        autonomy: AutonomyLevel,
        tools: impl FnOnce(&Store) -> Vec<Arc<dyn Tool>> + 'static,
        customize: impl FnOnce(Gateway) -> Gateway,
    ) -> TestGateway {
        Self::start_opts(
            Options {
                settings,
                autonomy,
                tools: Box::new(tools),
                ..Options::default()
            },
            customize,
        )
        .await
    }

    /// Starts one as `options` say, letting `customize` add to the gateway.
    pub async fn start_opts(
        options: Options,
        customize: impl FnOnce(Gateway) -> Gateway,
    ) -> TestGateway {
        let Options {
            settings,
            approval_timeout,
            clock,
            autonomy,
            tools,
        } = options;
        let llm = FakeLlmServer::start().await.unwrap();
        let provider: Arc<dyn LlmProvider> = build_provider(&llm.openai_settings()).unwrap();
        let db = tempfile::tempdir().unwrap();
        let db_url = format!("sqlite://{}/cairn.db", db.path().display());
        let (store, _) = Store::open(&db_url).await.unwrap();
        let workspace = tempfile::tempdir().unwrap();

        let writer = Arc::new(Writer::default());
        let mut registry = ToolRegistry::new();
        registry.register(writer.clone()).unwrap();
        for tool in tools(&store) {
            registry.register(tool).unwrap();
        }
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy,
            ..Default::default()
        });
        let runner = Arc::new(ToolRunner::new(Arc::new(registry), Arc::new(policy)));
        let agent = AgentLoop::new(
            provider.clone(),
            runner.clone(),
            Arc::new(HookRegistry::new()),
            LoopConfig::default(),
        );
        let chat = Arc::new(
            cairn_test_support::agent::chat_service(
                &store,
                clock.clone(),
                agent,
                workspace.path(),
                approval_timeout,
            )
            // Image URLs: loopback allowed for local test servers, other private ranges refused.
            .with_net(Arc::new(
                cairn_agent::tools::net::NetClient::new(cairn_agent::tools::http::HttpConfig {
                    allowed_private_networks: vec!["127.0.0.1".into()],
                    ..Default::default()
                })
                .unwrap(),
            )),
        );

        let notifier = Notifier::new(
            store.clone(),
            Arc::new(ChannelSet::new()),
            NotifySettings::default(),
        );
        let ctx = ToolContext::new(workspace.path(), "routines").with_clock(clock.clone());
        let actions = AgentActions::new(store.clone(), workspace.path(), clock.clone())
            .with_llm(provider.clone(), provider)
            .with_tools(runner, ctx);
        let engine = RoutineEngine::new(
            store.clone(),
            clock.clone(),
            Arc::new(actions),
            Some(notifier.clone()),
            EngineSettings::new("test-gateway", chrono_tz::UTC),
        );

        let token = auth::new_token();
        store
            .create_api_token(
                &NewApiToken {
                    name: "test".into(),
                    token_hash: auth::hash_secret(&token),
                    origin: "cli".into(),
                    expires_at: None,
                },
                clock.now(),
            )
            .await
            .unwrap();

        let shutdown = CancellationToken::new();
        let listener = cairn_gateway::bind(&settings).await.unwrap();
        let limits = settings.clone();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let pairing_key = PairingKey::ephemeral();
        let gateway = Gateway::new(store.clone(), clock, settings, "ada")
            .with_pairing_key(pairing_key.clone())
            .with_chat(chat.clone(), "fake-model")
            .with_engine(engine.clone())
            .with_notifier(notifier.clone())
            .with_shutdown(shutdown.clone());
        let app = cairn_gateway::router(Arc::new(customize(gateway)));
        let server = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { cairn_gateway::serve(listener, app, &limits, shutdown).await }
        });
        TestGateway {
            base,
            token,
            store,
            llm,
            engine,
            notifier,
            chat,
            writer,
            http: cairn_llm::tls::client().unwrap(),
            shutdown,
            server,
            workspace,
            pairing_key,
            db_url,
            _db: db,
        }
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A GET with the bearer token.
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(self.url(path)).bearer_auth(&self.token)
    }

    /// A fresh pairing code this gateway accepts (as `cairn pair` makes one).
    pub async fn pairing_code(&self) -> String {
        cairn_gateway::pairing::issue_code(&self.store, &self.pairing_key, SystemClock.now())
            .await
            .unwrap()
    }

    /// A POST with the bearer token.
    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.post(self.url(path)).bearer_auth(&self.token)
    }

    /// Stops the server and waits for it (graceful shutdown must end).
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.server)
            .await
            .expect("graceful shutdown ended")
            .unwrap()
            .unwrap();
    }
}

/// The `error.code` of an error answer, checking its shape.
pub async fn error_code(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    let code = body["error"]["code"]
        .as_str()
        .expect("error.code")
        .to_string();
    assert!(body["error"]["message"].is_string(), "{body}");
    (status, code)
}
