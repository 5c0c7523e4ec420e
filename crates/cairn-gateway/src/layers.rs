//! Middleware around every route: the request id (`x-request-id`, on every
//! answer and in the logs of the request) and CORS for the origins in
//! `gateway.cors_origins`.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use crate::state::AppState;

/// The request id header.
pub const REQUEST_ID: &str = "x-request-id";

/// Longest client-sent request id kept (a longer or odd one is replaced).
const MAX_ID_LEN: usize = 128;

/// A request id of our own, for a request that brought none (or a bad one).
pub fn new_request_id() -> String {
    format!("req_{}", uuid::Uuid::new_v4().simple())
}

/// Gives the request an id (the client's `x-request-id` when it is a
/// plain token, else a fresh one), runs it in a span carrying the id, and
/// answers with the id.
pub async fn request_id(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= MAX_ID_LEN
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        })
        .map_or_else(new_request_id, str::to_string);
    let span = tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path());
    let mut response = next.run(req).instrument(span).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// CORS: a preflight from a listed origin is answered here (204 with the
/// allowed method and headers); other requests from it get the origin
/// allowed on their answer. Unlisted origins get no CORS headers at all,
/// so the browser refuses the answer.
pub async fn cors(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .filter(|o| {
            state
                .settings()
                .cors_origins
                .iter()
                .any(|allowed| allowed.trim_end_matches('/') == *o)
        })
        .and_then(|o| HeaderValue::from_str(o).ok());
    let Some(origin) = origin else {
        return next.run(req).await;
    };
    let preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        allow(headers, origin);
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE, OPTIONS"),
        );
        let asked = req
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned()
            .unwrap_or_else(|| HeaderValue::from_static("authorization, content-type"));
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked);
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        return response;
    }
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    allow(headers, origin);
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("x-request-id, retry-after"),
    );
    response
}

fn allow(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::body::Body;
    use tower_service::Service;

    use super::*;

    /// Everything the subscriber writes, for the assertions.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_request_id_is_answered_and_in_the_requests_logs() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let mut app = axum::Router::new()
            .route(
                "/",
                axum::routing::get(|| async {
                    tracing::info!("handled");
                }),
            )
            .layer(axum::middleware::from_fn(request_id));
        let call = |id: Option<&str>| {
            let mut request = Request::builder().uri("/");
            if let Some(id) = id {
                request = request.header(REQUEST_ID, id);
            }
            request.body(Body::empty()).unwrap()
        };
        let kept = app.call(call(Some("client-7"))).await.unwrap();
        assert_eq!(kept.headers()[REQUEST_ID], "client-7");
        let fresh = app.call(call(Some("bad id with spaces"))).await.unwrap();
        let fresh = fresh.headers()[REQUEST_ID].to_str().unwrap().to_string();
        assert!(fresh.starts_with("req_") && fresh.len() == 36, "{fresh}");
        let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(
            logs.contains("request_id=client-7") && logs.contains("handled"),
            "{logs}"
        );
        assert!(logs.contains(&format!("request_id={fresh}")), "{logs}");
    }
}
