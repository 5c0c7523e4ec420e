//! The web dashboard: a build-free front end (plain HTML, CSS and ES
//! modules in `crates/cairn-gateway/dashboard/`, embedded in the binary at
//! compile time) served at `/`, which reads and changes everything through
//! the same JSON API as other clients, authenticated by a session cookie
//! ([`session`]). [`api`] adds the few endpoints only the dashboard needs
//! (schedule preview, memory, costs, retry, YAML), each a call on an
//! existing service.
//!
//! Architecture invariant: the assets are the only front end; nothing here
//! decides anything a service decides. Every answer of these routes carries
//! a strict Content-Security-Policy (no inline script, `default-src 'self'`),
//! so the pages load nothing from another origin.

pub mod api;
pub mod chat;
pub mod markdown;
pub mod session;

use axum::Router;
use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};

use crate::error::ApiError;
use crate::state::AppState;

/// The Content-Security-Policy of every dashboard answer.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
frame-ancestors 'none'";

/// One embedded file: its name under `/ui/assets/`, type and bytes.
struct Asset {
    name: &'static str,
    mime: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $mime:expr) => {
        Asset {
            name: $name,
            mime: $mime,
            bytes: include_bytes!(concat!("../../dashboard/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file the pages load (the page weight is these, less index.html).
const ASSETS: &[Asset] = &[
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("js/app.js", JS),
    asset!("js/api.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/live.js", JS),
    asset!("js/home.js", JS),
    asset!("js/chat.js", JS),
    asset!("js/markdown.js", JS),
    asset!("js/routines.js", JS),
    asset!("js/routine_form.js", JS),
    asset!("js/tasks.js", JS),
    asset!("js/inbox.js", JS),
    asset!("js/memory.js", JS),
    asset!("js/costs.js", JS),
    asset!("js/status.js", JS),
];

const INDEX: &[u8] = include_bytes!("../../dashboard/index.html");

/// Bytes of JavaScript and CSS the dashboard serves, for its weight budget.
pub fn page_weight() -> (usize, usize) {
    let sum = |ext: &str| {
        ASSETS
            .iter()
            .filter(|a| a.name.ends_with(ext))
            .map(|a| a.bytes.len())
            .sum()
    };
    (sum(".js"), sum(".css"))
}

/// The dashboard's routes: the page, its assets, the session and [`api`].
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/ui/assets/{*name}", get(asset))
        .route(
            "/ui/session",
            get(session::current)
                .post(session::sign_in)
                .delete(session::sign_out),
        )
        .route("/ui/api/schedule", get(api::explain))
        .route(
            "/ui/api/memory",
            get(api::memory_search).post(api::memory_add),
        )
        .route("/ui/api/memory/{id}", delete(api::memory_forget))
        .route("/ui/api/costs", get(api::costs))
        .route("/ui/api/doctor", get(api::doctor))
        .route(
            "/ui/api/notifications/{id}/retry",
            post(api::retry_notification),
        )
        .route("/ui/api/routines/{id}/yaml", get(api::routine_yaml))
        .route("/ui/api/routines/agents", get(api::routine_agents))
        .route("/ui/api/setup", get(api::setup))
        .route("/ui/api/chat/history", get(chat::history))
        .route("/ui/api/chat/thread", post(chat::thread_action))
        .route("/ui/api/markdown", post(chat::render_markdown))
        .layer(axum::middleware::map_response(secure_headers))
}

/// The headers every dashboard answer carries.
async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let fixed: [(&str, &'static str); 4] = [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
    ];
    for (name, value) in fixed {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    response
}

/// `GET /`: the page (the same shell for every view; the script draws it).
async fn index() -> Response {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
        ],
        INDEX,
    )
        .into_response()
}

/// `GET /ui/assets/{name}`: one embedded file.
async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => (
            StatusCode::OK,
            [(CONTENT_TYPE, a.mime), (CACHE_CONTROL, "no-cache")],
            a.bytes,
        )
            .into_response(),
        None => ApiError::not_found(format!("no dashboard asset {name:?}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_and_styles_weigh_under_150_kb() {
        let (js, css) = page_weight();
        assert!(js > 0 && css > 0);
        assert!(js + css < 150 * 1024, "JS {js} B + CSS {css} B");
    }

    #[test]
    fn no_asset_loads_or_names_another_origin() {
        let index = std::str::from_utf8(INDEX).unwrap();
        assert!(
            !index.contains("<script>") && !index.contains(" style="),
            "inline code in index.html"
        );
        for a in ASSETS
            .iter()
            .map(|a| (a.name, a.bytes))
            .chain([("index.html", INDEX)])
        {
            // The SVG namespace is a name, never fetched.
            let text = std::str::from_utf8(a.1)
                .unwrap()
                .replace("http://www.w3.org/2000/svg", "");
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "{} names another origin",
                a.0
            );
        }
    }
}
