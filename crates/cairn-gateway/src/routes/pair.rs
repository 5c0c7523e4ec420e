//! `POST /pair`: trades a one-time pairing code (printed by `cairn pair`,
//! or by `cairn daemon` while nothing was ever paired) for a bearer token.
//! Limited per client to 10 attempts a minute, and for everyone together
//! to 10 wrong codes: then every outstanding code is void until `cairn
//! pair` makes a new one on the machine.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use cairn_store::{NewApiToken, PairOutcome};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth;
use crate::client::ClientIp;
use crate::error::{ApiError, ErrorBody};
use crate::pairing::{self, WRONG_CODES_LIMIT};
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
    params(("X-Pairing-Code" = String, Header, description = "The code `cairn pair` printed (ABCDE-FGHJK; any case, dash optional)")),
    responses(
        (status = 200, description = "Paired", body = Paired),
        (status = 400, description = "No code sent, or not the shape of a code", body = ErrorBody),
        (status = 401, description = "The code is wrong, spent or expired, or pairing is locked by wrong codes", body = ErrorBody),
        (status = 421, description = "The request's Host is not one of the gateway's own names (see gateway.allowed_hosts); nothing is counted", body = ErrorBody),
        (status = 429, description = "Too many attempts from this client; see Retry-After", body = ErrorBody)))]
async fn pair(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
) -> Result<Json<Paired>, ApiError> {
    let typed = headers
        .get(PAIRING_CODE_HEADER)
        .and_then(|v| v.to_str().ok());
    let (token, _) = redeem(&state, ip, typed, "pairing", pairing::paired_token_name).await?;
    Ok(Json(Paired {
        token,
        expires_in: state.settings().token_ttl.map(|d| d.as_secs()),
    }))
}

/// Trades the code `typed` for a new token recorded with `origin` under the
/// name `name_of(now)` makes: the one pairing path, for `POST /pair` and
/// the dashboard's sign-in. Returns the token (shown once) and its record.
pub async fn redeem(
    state: &AppState,
    ip: std::net::IpAddr,
    typed: Option<&str>,
    origin: &str,
    name_of: fn(chrono::DateTime<chrono::Utc>) -> String,
) -> Result<(String, cairn_store::ApiToken), ApiError> {
    state.limits().pair_attempt(ip)?;
    let typed = typed
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request("missing X-Pairing-Code header (the code `cairn pair` printed)")
        })?;
    // Not the shape of a code: a typo, not a guess, so it is not counted.
    let code = pairing::normalize(typed).ok_or_else(|| {
        ApiError::bad_request(format!(
            "X-Pairing-Code is not a pairing code: {} letters and digits like ABCDE-FGHJK (no 0, 1, I, L, O or U)",
            pairing::CODE_LEN
        ))
    })?;
    let now = state.clock().now();
    let ttl = state.settings().token_ttl;
    let token = auth::new_token();
    let record = NewApiToken {
        name: name_of(now),
        token_hash: auth::hash_secret(&token),
        origin: origin.into(),
        expires_at: ttl
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .map(|d| now + d),
    };
    let hash = state.pairing_key().hash(&code);
    match state
        .store()
        .pair_with_code(&hash, &record, now, WRONG_CODES_LIMIT)
        .await?
    {
        PairOutcome::Paired(paired) => {
            tracing::info!(token = %paired.name, client = %ip, "paired a new client");
            Ok((token, paired))
        }
        PairOutcome::Wrong { wrong_codes } if wrong_codes >= WRONG_CODES_LIMIT => {
            tracing::warn!(client = %ip, "{WRONG_CODES_LIMIT} wrong pairing codes: every outstanding code is void until `cairn pair` makes a new one");
            Err(locked())
        }
        PairOutcome::Wrong { .. } => Err(ApiError::unauthorized(
            "the pairing code is wrong, spent or expired (`cairn pair` prints a fresh one)",
        )),
        PairOutcome::Locked => Err(locked()),
    }
}

fn locked() -> ApiError {
    ApiError::unauthorized(format!(
        "pairing is locked after {WRONG_CODES_LIMIT} wrong codes: every code given out is void; run `cairn pair` on the machine for a new one"
    ))
}
