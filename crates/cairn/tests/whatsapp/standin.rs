//! A local stand-in of Meta's Graph API for WhatsApp (real HTTP on
//! 127.0.0.1, axum), written from the Cloud API's documentation: `POST
//! /{phone_number_id}/messages` (text, interactive reply buttons,
//! reactions) answers the new message's `wamid`; `GET /{media_id}` answers
//! a URL that serves the media with the same bearer token. Every message
//! is recorded; a call may be throttled (HTTP 429, code 130429) on demand.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

pub const TOKEN: &str = "EAAG-test-access-token";
pub const PHONE_ID: &str = "109876";

#[derive(Default)]
pub struct World {
    /// Messages sent by the business: (to, type, the whole body).
    pub sent: Vec<(String, String, Value)>,
    /// Media ids fetched.
    pub media: Vec<String>,
    /// Calls refused as throttled.
    pub throttled: u32,
    /// Calls still to throttle.
    throttle: u32,
}

#[derive(Clone)]
struct Shared {
    world: Arc<Mutex<World>>,
    url: Arc<Mutex<String>>,
}

pub struct StandIn {
    pub url: String,
    shared: Shared,
}

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {TOKEN}"))
}

fn error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "A1"}});
    (status, Json(body)).into_response()
}

async fn messages(
    State(s): State<Shared>,
    Path(phone): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, 190, "Invalid OAuth access token.");
    }
    if phone != PHONE_ID || body["messaging_product"] != "whatsapp" {
        return error(StatusCode::BAD_REQUEST, 100, "Invalid parameter");
    }
    let mut w = s.world.lock().unwrap();
    if w.throttle > 0 {
        w.throttle -= 1;
        w.throttled += 1;
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            130_429,
            "(#130429) Rate limit hit",
        );
    }
    let to = body["to"].as_str().unwrap_or_default().to_string();
    let kind = body["type"].as_str().unwrap_or_default().to_string();
    w.sent.push((to.clone(), kind, body));
    let id = format!("wamid.out.{}", w.sent.len());
    Json(json!({
        "messaging_product": "whatsapp",
        "contacts": [{"input": to, "wa_id": to}],
        "messages": [{"id": id}],
    }))
    .into_response()
}

async fn media_info(
    State(s): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, 190, "Invalid OAuth access token.");
    }
    // The same route reads the business number (`cairn channel test`).
    if id == PHONE_ID {
        return Json(json!({
            "verified_name": "Cairn Test", "display_phone_number": "+1 555-0100", "id": id,
        }))
        .into_response();
    }
    s.world.lock().unwrap().media.push(id.clone());
    let url = format!("{}/download/{id}", s.url.lock().unwrap());
    Json(json!({
        "messaging_product": "whatsapp", "url": url, "mime_type": "text/plain",
        "sha256": "00", "file_size": 21, "id": id,
    }))
    .into_response()
}

/// A 1×1 PNG, served for media ids starting with `IMG`.
pub const PNG: [u8; 70] = [
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0,
    0, 0, 31, 21, 196, 137, 0, 0, 0, 13, 73, 68, 65, 84, 120, 218, 99, 100, 248, 207, 80, 15, 0, 3,
    134, 1, 128, 90, 52, 125, 107, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];

async fn download(Path(id): Path<String>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if id.starts_with("IMG") {
        return PNG.to_vec().into_response();
    }
    b"hello from a document".to_vec().into_response()
}

impl StandIn {
    pub fn start() -> StandIn {
        let shared = Shared {
            world: Arc::default(),
            url: Arc::default(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let app_state = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = axum::Router::new()
                    .route("/{phone}/messages", post(messages))
                    .route("/{media}", get(media_info))
                    .route("/download/{media}", get(download))
                    .with_state(app_state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        let url = format!("http://{}", rx.recv().unwrap());
        *shared.url.lock().unwrap() = url.clone();
        StandIn { url, shared }
    }

    /// Refuses the next `n` message calls as throttled.
    pub fn throttle(&self, n: u32) {
        self.shared.world.lock().unwrap().throttle = n;
    }

    pub fn world<T>(&self, f: impl FnOnce(&World) -> T) -> T {
        f(&self.shared.world.lock().unwrap())
    }

    /// Waits (up to 60 s) until `f` holds.
    pub fn until(&self, what: &str, f: impl Fn(&World) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.world(&f) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The text messages sent to `to`, in order.
    pub fn texts(&self, to: &str) -> Vec<String> {
        self.world(|w| texts(w, to))
    }

    /// The messages of `kind` sent to `to`, whole.
    pub fn sent(&self, to: &str, kind: &str) -> Vec<Value> {
        self.world(|w| {
            w.sent
                .iter()
                .filter(|(t, k, _)| t == to && k == kind)
                .map(|(_, _, b)| b.clone())
                .collect()
        })
    }
}

/// The text messages sent to `to`, in order.
pub fn texts(w: &World, to: &str) -> Vec<String> {
    w.sent
        .iter()
        .filter(|(t, k, _)| t == to && k == "text")
        .map(|(_, _, b)| b["text"]["body"].as_str().unwrap_or_default().to_string())
        .collect()
}
