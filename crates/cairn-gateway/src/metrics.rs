//! Prometheus metrics: one recorder per process (the `metrics` facade's
//! global), rendered by `GET /metrics`, and the middleware that counts
//! requests by route and status. The other crates record through the
//! `metrics` macros, which do nothing until this recorder is installed.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Buckets of every `*_seconds` histogram: from a millisecond (an ack) to
/// fifteen minutes (a late routine fire).
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process's recorder the first time (later calls return the
/// same handle); `None` when another recorder was installed first.
/// Builds the handle only: no HTTP listener of its own.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let built = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
                .and_then(PrometheusBuilder::install_recorder);
            match built {
                Ok(handle) => Some(handle),
                Err(e) => {
                    tracing::warn!(error = %e, "metrics are off: cannot install the recorder");
                    None
                }
            }
        })
        .as_ref()
}

/// The metrics in the Prometheus text format, if the recorder is ours.
pub fn render() -> Option<String> {
    let handle = install()?;
    // Drains histogram samples into their buckets before rendering.
    handle.run_upkeep();
    Some(handle.render())
}

/// The label of requests that matched no route.
pub const UNMATCHED: &str = "unmatched";

/// A method's label: the standard methods by name, anything else `OTHER`,
/// so a client cannot add series by inventing methods.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "OTHER",
    }
}

/// Counts each request by method (see [`method_label`]), route (the
/// matched pattern, never the raw path; [`UNMATCHED`] for any other) and
/// status, and times it. Every label comes from a fixed set.
pub async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED.to_string(), |p| p.as_str().to_string());
    let method = method_label(req.method());
    let started = Instant::now();
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("cairn_http_requests_total", "method" => method, "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("cairn_http_request_duration_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}
