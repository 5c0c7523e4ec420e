//! The app a gateway serves, which may still be on its way: the daemon
//! serves its port as soon as it is bound, and builds its store, engine
//! and routes after. Until they are in place `/healthz` answers (the
//! process is alive), `/readyz` says the daemon is starting, and every
//! other request waits for the app rather than failing.

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use axum::response::IntoResponse;
use tokio::sync::Notify;

use crate::error::ApiError;

/// Where the gateway's router is, or will be. Clones share it.
#[derive(Clone, Default)]
pub struct AppSlot(Arc<Slot>);

#[derive(Default)]
struct Slot {
    app: OnceLock<Router>,
    filled: Notify,
}

impl AppSlot {
    /// A slot to fill once the app is built.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Puts the app in place: requests waiting for it go on, later ones
    /// are answered by it at once. A second app is ignored (the first
    /// stays): a running gateway's routes do not change under it.
    pub fn fill(&self, app: Router) {
        if self.0.app.set(app).is_err() {
            tracing::warn!("the gateway's app was already in place; the new one is ignored");
        }
        self.0.filled.notify_waiters();
    }

    /// The app, once it is in place.
    pub(crate) fn now(&self) -> Option<&Router> {
        self.0.app.get()
    }

    /// Waits for the app.
    pub(crate) async fn wait(&self) -> Router {
        loop {
            let filled = self.0.filled.notified();
            if let Some(app) = self.now() {
                return app.clone();
            }
            filled.await;
        }
    }
}

impl From<Router> for AppSlot {
    fn from(app: Router) -> Self {
        let slot = Self::empty();
        slot.fill(app);
        slot
    }
}

/// What is answered before the app is in place, without it: `/healthz`
/// (alive) and `/readyz` (not yet). `None`: the request waits for the app.
pub(crate) fn before_the_app<B>(request: &Request<B>) -> Option<Response<Body>> {
    if request.method() != axum::http::Method::GET {
        return None;
    }
    match request.uri().path() {
        "/healthz" => Some(
            (
                StatusCode::OK,
                axum::Json(crate::routes::health::Alive {
                    status: "ok".to_string(),
                }),
            )
                .into_response(),
        ),
        "/readyz" => Some(ApiError::unavailable("the daemon is starting").into_response()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> Request<Body> {
        Request::get(path).body(Body::empty()).unwrap()
    }

    #[test]
    fn only_the_health_checks_are_answered_before_the_app() {
        let health = before_the_app(&get("/healthz")).unwrap();
        assert_eq!(health.status(), StatusCode::OK);
        let ready = before_the_app(&get("/readyz")).unwrap();
        assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(before_the_app(&get("/api/status")).is_none());
        let post = Request::post("/healthz").body(Body::empty()).unwrap();
        assert!(before_the_app(&post).is_none());
    }

    #[tokio::test]
    async fn a_request_waits_for_the_app_and_then_goes_on() {
        let slot = AppSlot::empty();
        assert!(slot.now().is_none());
        let waiting = tokio::spawn({
            let slot = slot.clone();
            async move { slot.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        slot.fill(Router::new());
        let _app: Router = waiting.await.unwrap();
        assert!(slot.now().is_some());
    }
}
