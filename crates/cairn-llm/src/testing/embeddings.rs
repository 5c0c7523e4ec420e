//! A fake OpenAI-compatible embeddings server on 127.0.0.1.
//!
//! Vectors are deterministic bags of words: each meaningful folded word (see
//! `cairn_core::fold::query_terms`) adds 1 to one of `dims` buckets chosen by
//! a hash of the word, and words longer than four letters also add 1 for
//! their first four letters (a crude stem, so "dentists" is near "dentist"
//! by meaning though not by keyword). The vector is normalised to unit
//! length. Texts sharing words are close, texts sharing none are orthogonal
//! (barring bucket collisions), and a test can predict both.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

/// Dimensions used when the request names none.
pub const FAKE_EMBEDDING_DIMS: usize = 256;

/// The fake embeddings model's name.
pub const FAKE_EMBEDDING_MODEL: &str = "fake-embed";

#[derive(Debug, Default)]
struct EmbedState {
    requests: Mutex<Vec<Value>>,
    texts: AtomicUsize,
    /// When set, every request fails with HTTP 500 (provider outage).
    failing: std::sync::atomic::AtomicBool,
}

/// A fake `/v1/embeddings` server; stops when dropped.
#[derive(Debug)]
pub struct FakeEmbeddingsServer {
    addr: SocketAddr,
    state: Arc<EmbedState>,
    _runner: super::server::Runner,
}

/// The fake vector of `text` with `dims` dimensions (what the server answers).
pub fn fake_embedding(text: &str, dims: usize) -> Vec<f32> {
    let dims = dims.max(1);
    let mut v = vec![0.0_f32; dims];
    let mut add = |feature: &str| {
        // FNV-1a: stable across runs and platforms.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in feature.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        v[(h % dims as u64) as usize] += 1.0;
    };
    for word in cairn_core::fold::query_terms(text) {
        add(&word);
        if word.chars().count() > 4 {
            let stem: String = word.chars().take(4).collect();
            add(&format!("{stem}~"));
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

impl FakeEmbeddingsServer {
    /// Starts on the current runtime.
    pub async fn start() -> std::io::Result<Self> {
        let state = Arc::new(EmbedState::default());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let app = router(Arc::clone(&state));
        let handle = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::warn!(%error, "FakeEmbeddingsServer stopped");
            }
        });
        Ok(Self {
            addr,
            state,
            _runner: super::server::Runner::Task(handle),
        })
    }

    /// Starts on its own thread and runtime, for black-box tests of the binary.
    pub fn start_on_thread() -> std::io::Result<Self> {
        let state = Arc::new(EmbedState::default());
        let app = router(Arc::clone(&state));
        let (addr, runner) = super::server::spawn_thread_with(app, "fake-embeddings-server")?;
        Ok(Self {
            addr,
            state,
            _runner: runner,
        })
    }

    /// Base URL for the client: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Settings pointing here (no timeout, so paused-time safe).
    pub fn settings(&self, dims: Option<u32>) -> crate::EmbeddingsSettings {
        crate::EmbeddingsSettings {
            provider: "fake-embeddings".to_string(),
            base_url: self.base_url(),
            model: FAKE_EMBEDDING_MODEL.to_string(),
            dimensions: dims,
            api_key: Some(secrecy::SecretString::from(super::FAKE_API_KEY)),
            timeout: None,
        }
    }

    /// Every request body so far.
    pub fn requests(&self) -> Vec<Value> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many texts were embedded so far.
    pub fn texts_embedded(&self) -> usize {
        self.state.texts.load(Ordering::SeqCst)
    }

    /// Makes every later request fail (or succeed again).
    pub fn set_failing(&self, failing: bool) {
        self.state.failing.store(failing, Ordering::SeqCst);
    }
}

fn router(state: Arc<EmbedState>) -> Router {
    Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(state)
}

async fn embeddings(
    State(state): State<Arc<EmbedState>>,
    axum::Json(body): axum::Json<Value>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    state
        .requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(body.clone());
    if state.failing.load(Ordering::SeqCst) {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {"message": "fake embeddings outage"}})),
        )
            .into_response();
    }
    let dims = body
        .get("dimensions")
        .and_then(Value::as_u64)
        .map_or(FAKE_EMBEDDING_DIMS, |d| d as usize);
    let inputs: Vec<String> = match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_string())
            .collect(),
        _ => Vec::new(),
    };
    state.texts.fetch_add(inputs.len(), Ordering::SeqCst);
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": fake_embedding(text, dims)}))
        .collect();
    axum::Json(json!({
        "object": "list",
        "data": data,
        "model": body.get("model").cloned().unwrap_or(Value::Null),
        "usage": {"prompt_tokens": 0, "total_tokens": 0}
    }))
    .into_response()
}
