//! Who is asking: the peer address, or the first `X-Forwarded-For` entry
//! when the configuration says a trusted proxy sets it. Rate limits and
//! lockouts are kept per client.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::state::AppState;

/// The client's address as rate limits see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientIp(pub IpAddr);

impl FromRequestParts<AppState> for ClientIp {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if state.settings().trust_forwarded_for
            && let Some(ip) = forwarded_for(parts)
        {
            return Ok(ClientIp(ip));
        }
        match parts.extensions.get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(addr)) => Ok(ClientIp(addr.ip())),
            None => Err(ApiError::internal(
                "the client's address is unknown",
                &"the server was started without connect info",
            )),
        }
    }
}

/// The left-most (originating) address of `X-Forwarded-For`, if it parses.
fn forwarded_for(parts: &Parts) -> Option<IpAddr> {
    let value = parts.headers.get("x-forwarded-for")?.to_str().ok()?;
    value.split(',').next()?.trim().parse().ok()
}
