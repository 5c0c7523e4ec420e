//! A fake HTTP service on 127.0.0.1: records every request and answers
//! from the test's responder.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `POST`, …
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// Every header.
    pub headers: HeaderMap,
    /// The raw body.
    pub body: Bytes,
}

impl Recorded {
    /// A header as text; fails when missing or repeated.
    pub fn header(&self, name: &str) -> &str {
        let all: Vec<_> = self.headers.get_all(name).iter().collect();
        assert_eq!(all.len(), 1, "header {name}: {all:?}");
        all[0].to_str().unwrap()
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

type Responder = Arc<dyn Fn(&Recorded) -> (u16, String) + Send + Sync>;

#[derive(Clone)]
struct Shared {
    requests: Arc<Mutex<Vec<Recorded>>>,
    respond: Responder,
}

/// A running fake; stops when dropped.
pub struct FakeServer {
    base: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    /// Starts a server answering every request with `status` and `body`.
    pub async fn answering(status: u16, body: &str) -> FakeServer {
        let body = body.to_string();
        FakeServer::start(move |_| (status, body.clone())).await
    }

    /// Starts a server answering each request with `respond(request)`.
    pub async fn start(
        respond: impl Fn(&Recorded) -> (u16, String) + Send + Sync + 'static,
    ) -> FakeServer {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            requests: requests.clone(),
            respond: Arc::new(respond),
        };
        let app = Router::new().fallback(record).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeServer {
            base,
            requests,
            task,
        }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The one request received; fails when there were others.
    pub fn only_request(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "{requests:#?}");
        requests.into_iter().next().unwrap()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn record(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        method,
        path: uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        headers,
        body,
    };
    let (status, answer) = (shared.respond)(&recorded);
    shared.requests.lock().unwrap().push(recorded);
    let content_type = if answer.starts_with('{') {
        "application/json"
    } else {
        "text/plain"
    };
    (
        StatusCode::from_u16(status).unwrap(),
        [(header::CONTENT_TYPE, content_type)],
        answer,
    )
        .into_response()
}
