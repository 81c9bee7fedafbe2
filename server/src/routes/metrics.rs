//! `/metrics`: Prometheus metrics, counted from the spans of ingest, search, context, jobs and
//! model calls (`mnemo-telemetry`), with the queues read at scrape time. Readable without a key,
//! with an admin key only, or not at all, as `[telemetry] metrics` says.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use mnemo_kernel::host::MetricsAccess;
use mnemo_telemetry::LiveGauges;

use crate::error::ApiError;
use crate::AppState;

/// Every metric as OpenMetrics text, which Prometheus reads.
pub(crate) async fn metrics(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(metrics) = state.metrics.as_ref() else {
        return Err(ApiError::not_found(
            "metrics are off (`[telemetry] metrics = \"off\"`)",
        ));
    };
    if state.metrics_access == MetricsAccess::Admin {
        crate::auth::authenticate(&state.keys, &headers)
            .await?
            .require_admin()?;
    }
    let index_queue = match state.memory.pending_index().await {
        Ok(pending) => Some(pending),
        Err(error) => {
            tracing::warn!(%error, "cannot read the indexer's queue for /metrics");
            None
        }
    };
    let live = LiveGauges {
        index_queue,
        events_in_flight: i64::try_from(state.kernel.context().router().in_flight())
            .unwrap_or(i64::MAX),
    };
    Ok((
        [(header::CONTENT_TYPE, mnemo_telemetry::CONTENT_TYPE)],
        metrics.render(live),
    )
        .into_response())
}
