//! `/api/notifications`: what cairn sent or tried to send, with its
//! delivery status; the person's inbox (what could not be delivered, or was
//! meant for it); marking inbox items read.

use axum::Json;
use axum::extract::{Path, State};
use cairn_core::notification::{DeliveryStatus, Notification};
use cairn_store::NotificationFilter;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiQuery;
use crate::state::AppState;

/// Most notifications one answer holds.
const MAX_LIMIT: u32 = 500;
/// Notifications answered when `limit` is absent.
const DEFAULT_LIMIT: u32 = 50;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_notifications))
        .routes(routes!(inbox))
        .routes(routes!(mark_all_read))
        .routes(routes!(mark_read))
}

/// A notification and how its delivery went.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationView {
    /// Its id.
    pub id: Uuid,
    /// The output channel.
    pub channel: String,
    /// Title.
    pub title: String,
    /// Text.
    pub body: String,
    /// `low`, `normal`, `high`, `urgent`.
    pub priority: String,
    /// Free labels.
    pub tags: Vec<String>,
    /// What produced it (`routine:NAME`, `job`, …).
    pub source: String,
    /// Recorded.
    pub created_at: DateTime<Utc>,
    /// Delivery status.
    pub status: NotificationStatus,
    /// Delivery attempts so far.
    pub attempts: u32,
    /// The next attempt (pending only).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the receiver confirmed it.
    pub delivered_at: Option<DateTime<Utc>>,
    /// Why the last attempt failed, or why it went to the inbox.
    pub last_error: Option<String>,
    /// Whether it is in the inbox.
    pub in_inbox: bool,
    /// When it was read in the inbox.
    pub read_at: Option<DateTime<Utc>>,
}

/// A delivery status.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotificationStatus {
    /// Not yet confirmed by the receiver.
    Pending,
    /// Confirmed.
    Delivered,
    /// Every attempt failed; it is in the inbox.
    Failed,
}

impl From<DeliveryStatus> for NotificationStatus {
    fn from(s: DeliveryStatus) -> Self {
        match s {
            DeliveryStatus::Pending => Self::Pending,
            DeliveryStatus::Delivered => Self::Delivered,
            DeliveryStatus::Failed => Self::Failed,
        }
    }
}

impl From<NotificationStatus> for DeliveryStatus {
    fn from(s: NotificationStatus) -> Self {
        match s {
            NotificationStatus::Pending => Self::Pending,
            NotificationStatus::Delivered => Self::Delivered,
            NotificationStatus::Failed => Self::Failed,
        }
    }
}

impl From<Notification> for NotificationView {
    fn from(n: Notification) -> Self {
        Self {
            id: n.id,
            channel: n.channel,
            title: n.title,
            body: n.body,
            priority: n.priority.to_string(),
            tags: n.tags,
            source: n.source,
            created_at: n.created_at,
            status: n.status.into(),
            attempts: n.attempts,
            next_attempt_at: n.next_attempt_at,
            delivered_at: n.delivered_at,
            last_error: n.last_error,
            in_inbox: n.in_inbox,
            read_at: n.read_at,
        }
    }
}

fn limit_of(limit: Option<u32>) -> Result<u32, ApiError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::bad_request(format!(
            "`limit` must be from 1 to {MAX_LIMIT}"
        ))),
    }
}

/// Which notifications to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this delivery status.
    pub status: Option<NotificationStatus>,
    /// At most this many, newest first (1 to 500; default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// Notifications with their delivery status, newest first.
#[utoipa::path(get, path = "/api/notifications", tag = "notifications", security(("bearer" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "Newest first", body = [NotificationView]),
        (status = 400, description = "A bad filter", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody)))]
async fn list_notifications(
    _: Authed,
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Vec<NotificationView>>, ApiError> {
    let filter = NotificationFilter {
        status: query.status.map(Into::into),
        limit: Some(limit_of(query.limit)?),
    };
    let items = state.store().list_notifications(&filter).await?;
    Ok(Json(items.into_iter().map(Into::into).collect()))
}

/// Which inbox items to show.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InboxQuery {
    /// Read items too (after the unread ones).
    pub all: Option<bool>,
    /// At most this many (1 to 500; default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// The person's inbox: unread items, newest first (`all=true` adds read ones after them).
#[utoipa::path(get, path = "/api/notifications/inbox", tag = "notifications", security(("bearer" = [])),
    params(InboxQuery),
    responses(
        (status = 200, description = "Unread first, then newest first", body = [NotificationView]),
        (status = 400, description = "A bad parameter", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody)))]
async fn inbox(
    _: Authed,
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<InboxQuery>,
) -> Result<Json<Vec<NotificationView>>, ApiError> {
    let limit = limit_of(query.limit)?;
    let items = state
        .store()
        .inbox(state.user_id(), query.all.unwrap_or(false), limit)
        .await?;
    Ok(Json(items.into_iter().map(Into::into).collect()))
}

/// How many items were marked read.
#[derive(Debug, Serialize, ToSchema)]
pub struct Marked {
    /// Items that were unread and now are read.
    pub marked: u64,
}

/// Marks every unread inbox item read.
#[utoipa::path(post, path = "/api/notifications/read", tag = "notifications", security(("bearer" = [])),
    responses(
        (status = 200, description = "How many were marked", body = Marked),
        (status = 401, description = "No valid token", body = ErrorBody)))]
async fn mark_all_read(_: Authed, State(state): State<AppState>) -> Result<Json<Marked>, ApiError> {
    let marked = state
        .store()
        .mark_read(state.user_id(), None, state.clock().now())
        .await?;
    Ok(Json(Marked { marked }))
}

/// Marks one inbox item read (marking one already read changes nothing).
#[utoipa::path(post, path = "/api/notifications/{id}/read", tag = "notifications", security(("bearer" = [])),
    params(("id" = String, Path, description = "The notification's id")),
    responses(
        (status = 200, description = "Marked (0 when it was already read)", body = Marked),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such notification in the inbox", body = ErrorBody)))]
async fn mark_read(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Marked>, ApiError> {
    let not_found = || ApiError::not_found(format!("no notification {id} in the inbox"));
    let uuid = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let found = state.store().get_notification(uuid).await?;
    if !found.is_some_and(|n| n.in_inbox && n.user_id == state.user_id()) {
        return Err(not_found());
    }
    let marked = state
        .store()
        .mark_read(state.user_id(), Some(uuid), state.clock().now())
        .await?;
    Ok(Json(Marked { marked }))
}
