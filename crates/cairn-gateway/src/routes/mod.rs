//! The endpoints, one module per area. Each module's `routes()` returns an
//! `OpenApiRouter` built with `utoipa_axum::routes!`, so the OpenAPI
//! document is generated from the handlers themselves.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub mod background;
pub mod events;
pub mod health;
pub mod hooks;
pub mod jobs;
pub mod metrics;
pub mod notifications;
pub mod openai;
pub mod pair;
pub mod routine_ops;
pub mod routines;
pub mod sessions;
pub mod status;
pub mod watchers;
pub mod webhook;
pub mod whatsapp;
pub mod ws;

/// The document's fixed parts; paths are added by the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "cairn gateway",
        description = "The HTTP API of a cairn daemon: pairing, webhooks, routines, notifications, sessions, jobs, watchers, events and an OpenAI-compatible chat API."
    ),
    modifiers(&BearerAuth),
    components(schemas(crate::error::ErrorBody))
)]
pub struct ApiDoc;

/// Declares the `bearer` security scheme the authenticated paths name.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Endpoints that answer promptly: they run under the request time limit.
pub fn ordinary() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(health::routes())
        .merge(routines::routes())
        .merge(routine_ops::routes())
        .merge(notifications::routes())
        .merge(sessions::routes())
        .merge(jobs::routes())
        .merge(background::routes())
        .merge(watchers::routes())
        .merge(status::routes())
        .merge(pair::routes())
        .merge(hooks::routes())
        .merge(metrics::routes())
        .merge(whatsapp::routes())
}

/// Streams and agent turns: no request time limit (they end on their own,
/// or when the client or the daemon goes).
pub fn long() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(events::routes())
        .merge(ws::routes())
        .merge(openai::routes())
        .merge(webhook::routes())
}
