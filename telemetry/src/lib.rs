//! One job: turn the `tracing` spans that the kernel and the extensions open into what
//! operators read, at the binary's edge. Libraries only open spans (`mnemo_kernel::spans`,
//! `mnemo_memory_api::spans`); this crate builds the process's subscriber from
//!
//! - the log lines on stderr (`tracing-subscriber`'s fmt layer, filtered by `RUST_LOG` or `-v`);
//! - optionally, OpenTelemetry traces exported over OTLP/HTTP (protobuf) to the collector
//!   `[telemetry] otlp_endpoint` names ([`otlp`]), flushed by [`Telemetry::shutdown`];
//! - optionally, Prometheus metrics ([`Metrics`]), fed by a layer that turns closed spans into
//!   histograms and counters ([`MetricsLayer`]) and rendered as text for `/metrics`.
//!
//! So one instrumentation serves logs, traces and metrics.

mod error;
mod metrics;
mod metrics_layer;
pub mod otlp;
mod subscriber;

pub use error::TelemetryError;
pub use metrics::{LiveGauges, Metrics, CONTENT_TYPE};
pub use metrics_layer::MetricsLayer;
pub use subscriber::{Telemetry, TelemetryOptions};
