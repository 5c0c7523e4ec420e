//! `GET /v1/models` on the fake server: the list set by the test, in the
//! shape of the protocol that asked (Anthropic's when the request carries
//! `anthropic-version`, paged by `limit` / `after_id`), or a scripted error.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::FAKE_MODEL;
use super::server::{ServerState, lock, record};
use crate::models::ModelInfo;

/// What the fake answers to `GET /v1/models`.
#[derive(Debug, Clone)]
pub(crate) enum ModelsAnswer {
    /// These models, at most `page_size` per Anthropic page.
    List {
        models: Vec<ModelInfo>,
        page_size: Option<usize>,
    },
    /// This HTTP status with this message.
    Error { status: u16, message: String },
}

impl Default for ModelsAnswer {
    fn default() -> Self {
        Self::List {
            models: vec![ModelInfo::new(FAKE_MODEL)],
            page_size: None,
        }
    }
}

pub(crate) async fn list(
    State(state): State<Arc<ServerState>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let path = match sorted_query(&query) {
        q if q.is_empty() => "/v1/models".to_owned(),
        q => format!("/v1/models?{q}"),
    };
    record(&state, Method::GET.as_str(), &path, &headers, &[]);
    let anthropic = headers.contains_key("anthropic-version");
    let answer = lock(&state.models).clone();
    match answer {
        ModelsAnswer::Error { status, message } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = if anthropic {
                json!({"type": "error", "error": {"type": "api_error", "message": message}})
            } else {
                json!({"error": {"message": message, "type": "api_error"}})
            };
            (status, axum::Json(body)).into_response()
        }
        ModelsAnswer::List { models, .. } if !anthropic => axum::Json(json!({
            "object": "list",
            "data": models
                .iter()
                .map(|m| json!({"id": m.id, "object": "model", "owned_by": "fake"}))
                .collect::<Vec<_>>(),
        }))
        .into_response(),
        ModelsAnswer::List { models, page_size } => {
            let start = query
                .get("after_id")
                .and_then(|after| models.iter().position(|m| &m.id == after))
                .map_or(0, |at| at + 1);
            let limit = query
                .get("limit")
                .and_then(|l| l.parse::<usize>().ok())
                .unwrap_or(20)
                .min(page_size.unwrap_or(usize::MAX))
                .max(1);
            let page: Vec<&ModelInfo> = models.iter().skip(start).take(limit).collect();
            let data: Vec<Value> = page
                .iter()
                .map(|m| {
                    json!({"type": "model", "id": m.id, "display_name": m.display_name.clone().unwrap_or_else(|| m.id.clone()), "created_at": "2025-01-01T00:00:00Z"})
                })
                .collect();
            axum::Json(json!({
                "data": data,
                "has_more": start + page.len() < models.len(),
                "first_id": page.first().map(|m| m.id.clone()),
                "last_id": page.last().map(|m| m.id.clone()),
            }))
            .into_response()
        }
    }
}

/// The query as recorded (sorted, so recorded paths are stable).
fn sorted_query(query: &HashMap<String, String>) -> String {
    let mut pairs: Vec<_> = query.iter().collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}
