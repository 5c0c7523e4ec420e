//! `POST /pair`: trades a one-time pairing code (printed by `cairn daemon`
//! or `cairn pair`) for a bearer token. Limited per client: 10 attempts a
//! minute, and 5 wrong codes lock the client out for 5 minutes.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use cairn_store::NewApiToken;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth;
use crate::client::ClientIp;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// The header carrying the code.
pub const PAIRING_CODE_HEADER: &str = "x-pairing-code";

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(pair))
}

/// A token bought by pairing.
#[derive(Debug, Serialize, ToSchema)]
pub struct Paired {
    /// The bearer token; shown this once.
    pub token: String,
    /// Seconds until it expires; `null` when it never does.
    pub expires_in: Option<u64>,
}

/// Trades a pairing code for a bearer token.
#[utoipa::path(post, path = "/pair", tag = "auth",
    params(("X-Pairing-Code" = String, Header, description = "The 6-digit code the daemon printed")),
    responses(
        (status = 200, description = "Paired", body = Paired),
        (status = 400, description = "No code sent", body = ErrorBody),
        (status = 401, description = "The code is wrong, spent or expired", body = ErrorBody),
        (status = 429, description = "Rate-limited or locked out; see Retry-After", body = ErrorBody)))]
async fn pair(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
) -> Result<Json<Paired>, ApiError> {
    state.limits().pair_attempt(ip)?;
    let code = headers
        .get(PAIRING_CODE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(
                "missing X-Pairing-Code header (the code `cairn daemon` or `cairn pair` printed)",
            )
        })?;
    let now = state.clock().now();
    let ttl = state.settings().token_ttl;
    let token = auth::new_token();
    let record = NewApiToken {
        name: auth::paired_token_name(now),
        token_hash: auth::hash_secret(&token),
        origin: "pairing".into(),
        expires_at: ttl
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .map(|d| now + d),
    };
    match state
        .store()
        .pair_with_code(&auth::hash_secret(code), &record, now)
        .await?
    {
        Some(paired) => {
            state.limits().pair_succeeded(ip);
            tracing::info!(token = %paired.name, client = %ip, "paired a new client");
            Ok(Json(Paired {
                token,
                expires_in: ttl.map(|d| d.as_secs()),
            }))
        }
        None => {
            let locked = state.limits().pair_failed(ip);
            Err(ApiError::unauthorized(if locked {
                "the pairing code is wrong; too many wrong codes, so this client must wait 5 minutes"
            } else {
                "the pairing code is wrong, spent or expired (`cairn pair` prints a fresh one)"
            }))
        }
    }
}
