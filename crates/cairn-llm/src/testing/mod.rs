//! Test doubles for every crate: a fake LLM HTTP server and an in-process provider.
//!
//! [`FakeLlmServer`] listens on 127.0.0.1 (random port) and speaks both wire
//! protocols — `POST /v1/chat/completions` (OpenAI) and `POST /v1/messages`
//! (Anthropic), whole or streamed (`"stream": true`) — answering each request
//! with the next [`Scripted`] response from one queue shared by both
//! endpoints. It records every request. When the queue is empty it answers
//! HTTP 500 with a body saying the script ran out (it never hangs).
//! `GET /v1/models` lists [`FAKE_MODEL`], or what
//! [`FakeLlmServer::set_models`] set, in either protocol's shape.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use cairn_llm::testing::{FakeLlmServer, Scripted};
//! use cairn_llm::{ChatMessage, ChatRequest, build_provider};
//!
//! let server = FakeLlmServer::start().await?;
//! server.push(Scripted::tool_call("shell", serde_json::json!({"command": "ls"})));
//! server.push(Scripted::text("done"));
//! let llm = build_provider(&server.openai_settings())?; // or anthropic_settings()
//! let answer = llm.complete(&ChatRequest::new(vec![ChatMessage::user("hi")])).await?;
//! assert_eq!(answer.tool_calls[0].name, "shell");
//! assert_eq!(server.requests()[0].body["messages"][0]["content"], "hi");
//! # Ok(()) }
//! ```
//!
//! **Paused time.** Under `tokio::time::pause`, tokio jumps the clock to the
//! next pending timer whenever the runtime waits on a real socket. So in such
//! tests use the `*_settings()` helpers (or `timeout: None`), which leave no
//! client timer pending during HTTP exchanges; then retry sleeps and
//! scripted delays advance the paused clock exactly. Start the server with
//! [`FakeLlmServer::start`] so its delays run on the same paused clock.
//!
//! **Black-box tests** of the built binary use [`FakeLlmServer::start_on_thread`]
//! (its own thread and runtime, no async needed) and pass
//! [`FakeLlmServer::base_url_openai`] to the binary's environment.

mod embeddings;
mod instant;
mod models;
mod render;
mod script;
mod server;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use embeddings::{
    FAKE_EMBEDDING_DIMS, FAKE_EMBEDDING_MODEL, FakeEmbeddingsServer, fake_embedding,
};
pub use instant::InstantProvider;
pub use script::{FakeToolCall, Scripted};

use crate::cost::{ModelPrice, PriceTable};
use crate::models::ModelInfo;
use crate::retry::RetryPolicy;
use crate::settings::{ProviderKind, ProviderSettings};
use models::ModelsAnswer;
use server::{Runner, ServerState};

/// The API key the `*_settings()` helpers use.
pub const FAKE_API_KEY: &str = "sk-fake-test-key-0123456789";
/// The model the `*_settings()` helpers use.
pub const FAKE_MODEL: &str = "fake-model";
/// The price of [`FAKE_MODEL`] in the helpers' settings: $1 per million input
/// tokens, $2 per million output tokens (so the default usage of 10 in / 5 out
/// costs 20 micro-dollars).
pub const FAKE_PRICE: ModelPrice = ModelPrice::new(1_000_000, 2_000_000);

/// Which wire protocol a request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /v1/messages`.
    Anthropic,
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// URL path (`/v1/chat/completions`, `/v1/messages`, ...).
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON (`Null` if it was not JSON).
    pub body: Value,
    /// The body as text.
    pub raw_body: String,
}

impl RecordedRequest {
    /// A header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// Whether the request asked for a streamed answer.
    pub fn is_stream(&self) -> bool {
        self.body
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The protocol, from the path.
    pub fn protocol(&self) -> Option<Protocol> {
        match self.path.as_str() {
            "/v1/chat/completions" => Some(Protocol::OpenAi),
            "/v1/messages" => Some(Protocol::Anthropic),
            _ => None,
        }
    }
}

/// A scripted fake LLM server on 127.0.0.1; stops when dropped.
#[derive(Debug)]
pub struct FakeLlmServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    _runner: Runner,
}

impl FakeLlmServer {
    /// Starts the server on the current tokio runtime (shares its clock, so
    /// scripted delays follow `tokio::time::pause`).
    pub async fn start() -> std::io::Result<Self> {
        let state = Arc::new(ServerState::default());
        let (addr, runner) = server::spawn_here(Arc::clone(&state)).await?;
        Ok(Self {
            addr,
            state,
            _runner: runner,
        })
    }

    /// Starts the server on its own thread and runtime (real time); callable
    /// without a runtime, e.g. from a black-box test of the binary.
    pub fn start_on_thread() -> std::io::Result<Self> {
        let state = Arc::new(ServerState::default());
        let (addr, runner) = server::spawn_thread(Arc::clone(&state))?;
        Ok(Self {
            addr,
            state,
            _runner: runner,
        })
    }

    /// The socket address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL for an OpenAI-compatible client: `http://127.0.0.1:PORT/v1`.
    pub fn base_url_openai(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for an Anthropic client: `http://127.0.0.1:PORT`.
    pub fn base_url_anthropic(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues the next answer.
    pub fn push(&self, scripted: Scripted) -> &Self {
        self.state.push(scripted);
        self
    }

    /// Queues several answers in order.
    pub fn push_all(&self, scripted: impl IntoIterator<Item = Scripted>) -> &Self {
        for one in scripted {
            self.state.push(one);
        }
        self
    }

    /// What `GET /v1/models` lists from now on (Anthropic pages of at most
    /// `page_size`, when given, so paging is exercised).
    pub fn set_models(&self, models: Vec<ModelInfo>, page_size: Option<usize>) -> &Self {
        *server::lock(&self.state.models) = ModelsAnswer::List { models, page_size };
        self
    }

    /// `GET /v1/models` answers HTTP `status` with `message` from now on.
    pub fn fail_models(&self, status: u16, message: &str) -> &Self {
        *server::lock(&self.state.models) = ModelsAnswer::Error {
            status,
            message: message.to_owned(),
        };
        self
    }

    /// Answers still queued.
    pub fn pending(&self) -> usize {
        self.state.pending()
    }

    /// The most chat requests it was answering at once so far (from
    /// arrival to answer, scripted delays included): how many callers
    /// really worked side by side.
    pub fn most_in_flight(&self) -> usize {
        usize::try_from(self.state.most_in_flight()).unwrap_or(usize::MAX)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests()
    }

    /// The most recent request.
    pub fn last_request(&self) -> Option<RecordedRequest> {
        self.state.requests().pop()
    }

    /// Drops queued answers and recorded requests.
    pub fn reset(&self) {
        self.state.clear();
    }

    /// OpenAI-compatible settings pointing here: [`FAKE_API_KEY`], [`FAKE_MODEL`]
    /// priced at [`FAKE_PRICE`], no client timers (paused-time safe), 2 quick retries.
    pub fn openai_settings(&self) -> ProviderSettings {
        fake_settings(ProviderKind::OpenAiCompatible, self.base_url_openai())
    }

    /// Anthropic settings pointing here, with the same defaults as [`Self::openai_settings`].
    pub fn anthropic_settings(&self) -> ProviderSettings {
        fake_settings(ProviderKind::Anthropic, self.base_url_anthropic())
    }
}

fn fake_settings(kind: ProviderKind, base_url: String) -> ProviderSettings {
    ProviderSettings {
        base_url: Some(base_url),
        timeout: None,
        retry: RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(100),
            max_retry_after: Duration::from_secs(60),
        },
        prices: PriceTable::empty().with(FAKE_MODEL, FAKE_PRICE),
        ..ProviderSettings::new(kind, FAKE_MODEL).with_api_key(FAKE_API_KEY)
    }
}
