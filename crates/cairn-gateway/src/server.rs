//! Binding the listener (loopback unless told otherwise), assembling the
//! router with its limits, and serving until shutdown.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use cairn_core::config::GatewayConfig;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::error::ApiError;
use crate::routes;
use crate::state::AppState;

/// Why the gateway could not listen.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// `gateway.host` is not an IP address (or `localhost`).
    #[error(
        "gateway.host \"{0}\" is not an IP address (use 127.0.0.1, ::1 or, with allow_public_bind, 0.0.0.0)"
    )]
    BadHost(String),
    /// A non-loopback address without `allow_public_bind`.
    #[error(
        "gateway.host {0} is reachable from other machines; set gateway.allow_public_bind = true (CAIRN_GATEWAY_ALLOW_PUBLIC_BIND=true) if that is what you want"
    )]
    Public(IpAddr),
    /// The port is taken.
    #[error(
        "port {port} on {host} is already in use (another cairn daemon?); choose another with --port, CAIRN_GATEWAY_PORT or gateway.port"
    )]
    InUse {
        /// The address.
        host: IpAddr,
        /// The port.
        port: u16,
    },
    /// Any other failure to listen.
    #[error("cannot listen on {addr}: {source}")]
    Other {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// The address `settings` asks for, refusing a public one unless allowed.
pub fn address(settings: &GatewayConfig) -> Result<SocketAddr, BindError> {
    let host = settings.host.trim();
    let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse()
            .map_err(|_| BindError::BadHost(host.to_string()))?
    };
    if !ip.is_loopback() && !settings.allow_public_bind {
        return Err(BindError::Public(ip));
    }
    Ok(SocketAddr::new(ip, settings.port))
}

/// Listens where `settings` says (port 0 picks a free one).
pub async fn bind(settings: &GatewayConfig) -> Result<TcpListener, BindError> {
    let addr = address(settings)?;
    TcpListener::bind(addr).await.map_err(|source| {
        if source.kind() == std::io::ErrorKind::AddrInUse {
            BindError::InUse {
                host: addr.ip(),
                port: addr.port(),
            }
        } else {
            BindError::Other { addr, source }
        }
    })
}

/// The gateway's routes over `state`, with the body limit, the request time
/// limit (not on streams or agent turns), JSON answers for unknown
/// routes (OpenAI's shape under `/v1`), the dashboard and pairing only for
/// this gateway's own host names ([`crate::own_host`]), CORS and request
/// ids; `/api/openapi.json` describes them all.
pub fn router(state: AppState) -> Router {
    crate::metrics::install();
    // The routers' own description is dropped here: the served document is
    // built when first asked for (an idle daemon never keeps it).
    let (ordinary, _) = documented_routes();
    let (long, _) = routes::long().split_for_parts();
    let ordinary = ordinary
        .merge(crate::dashboard::routes())
        .layer(middleware::from_fn_with_state(state.clone(), time_limit));
    Router::new()
        .merge(ordinary)
        .merge(long)
        .route(
            "/api/openapi.json",
            axum::routing::get(|| async { openapi_document() }),
        )
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this endpoint does not take that method",
            )
        })
        // Before any handler: a foreign Host counts toward nothing.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::own_host::guard,
        ))
        .layer(middleware::from_fn(routes::openai::openai_errors))
        .layer(middleware::from_fn(crate::metrics::track))
        .layer(DefaultBodyLimit::max(state.settings().body_limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::layers::cors,
        ))
        .layer(middleware::from_fn(crate::layers::request_id))
        .with_state(state)
}

/// The ordinary routes and the document describing them (with the API's
/// own description and security schemes).
fn documented_routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(routes::ApiDoc::openapi())
        .merge(routes::ordinary())
        .split_for_parts()
}

/// The OpenAPI document `/api/openapi.json` serves, built from the routes.
pub fn openapi_json() -> serde_json::Value {
    let (_, mut doc) = documented_routes();
    let (_, long_doc) = routes::long().split_for_parts();
    doc.merge(long_doc);
    crate::openapi::finish(&doc)
}

/// `/api/openapi.json`: built from the routes on first request (about 1 MB
/// of JSON values while it is made), then kept as its 80 KB of text.
fn openapi_document() -> Response {
    static DOCUMENT: std::sync::OnceLock<axum::body::Bytes> = std::sync::OnceLock::new();
    let text = DOCUMENT.get_or_init(|| {
        serde_json::to_vec(&openapi_json())
            .unwrap_or_default()
            .into()
    });
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text.clone(),
    )
        .into_response()
}

/// Ends a request that runs past `gateway.request_timeout_secs`.
async fn time_limit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let limit = state.settings().request_timeout;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!("the request took longer than {} s", limit.as_secs()),
        )
        .into_response(),
    }
}

/// Serves `app` on `listener` with the connection limits of `settings`
/// (see [`crate::listen`]) until `shutdown` is cancelled, then lets
/// requests in flight finish.
pub async fn serve(
    listener: TcpListener,
    app: impl Into<crate::AppSlot>,
    settings: &GatewayConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    crate::listen::serve(listener, app, settings, shutdown).await
}
