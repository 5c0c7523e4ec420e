//! The gateway: how every other program and device reaches cairn. An axum
//! server inside `cairn daemon` that serves the HTTP API (pairing, tokens,
//! webhooks, REST), WebSocket chat, SSE events and an OpenAI-compatible API,
//! all described by a generated OpenAPI document, and the web dashboard at
//! `/` ([`dashboard`]) over that same API.
//!
//! Architecture invariant: handlers hold no business logic of their own;
//! they authenticate, translate HTTP to calls on the store, the chat service,
//! the routine engine or the notifier, and translate the answer back. Every
//! error leaves as `{"error":{"code":…,"message":…}}` (on `/v1`, OpenAI's
//! `{"error":{"message","type","param","code"}}`) without internal paths or
//! secrets. Every answer carries an `x-request-id`.

pub mod auth;
pub mod client;
pub mod dashboard;
pub mod error;
pub mod events;
pub mod extract;
pub mod image_allowance;
pub mod layers;
pub mod limits;
pub mod listen;
pub mod metrics;
pub mod openapi;
pub mod opening;
pub mod own_host;
pub mod pairing;
pub mod revocation;
pub mod routes;
pub mod server;
pub mod state;
pub mod status;
pub mod webhook_signature;

pub use error::ApiError;
pub use opening::AppSlot;
pub use server::{BindError, bind, router, serve};
pub use state::{AppState, Gateway};
pub use status::{ComponentHealth, ComponentState, Components};
