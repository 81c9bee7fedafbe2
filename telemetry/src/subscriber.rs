//! The process's subscriber: log lines on stderr, and, as asked, OTLP traces and metrics.

use std::sync::Arc;

use mnemo_kernel::host::TelemetryConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::{filter_fn, EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

use crate::{Metrics, MetricsLayer, TelemetryError};

/// What the subscriber does.
#[derive(Debug, Clone)]
pub struct TelemetryOptions<'a> {
    /// The log filter when `RUST_LOG` is not set (`warn`, `info`, `debug`).
    pub log_filter: &'a str,
    /// Colours in the log lines.
    pub ansi: bool,
    /// Where traces go and under which service name; traces are sent only when its
    /// `otlp_endpoint` is set. `None`: no traces.
    pub traces: Option<&'a TelemetryConfig>,
    /// Whether to count spans into [`Metrics`].
    pub metrics: bool,
}

/// The installed subscriber's parts that outlive installing it.
#[derive(Debug)]
pub struct Telemetry {
    tracer_provider: Option<SdkTracerProvider>,
    metrics: Option<Arc<Metrics>>,
}

impl Telemetry {
    /// Builds the subscriber and sets it as the process's default.
    ///
    /// The log lines keep their own filter (`RUST_LOG`, else `log_filter`); traces take the
    /// `info` spans and events of mnemo's crates and tower-http's request spans, and metrics
    /// only the spans they measure, whatever the log level.
    ///
    /// # Errors
    /// [`TelemetryError`]: traces were asked for outside a tokio runtime, the exporter cannot
    /// be built, or a subscriber is already set.
    pub fn init(options: &TelemetryOptions<'_>) -> Result<Self, TelemetryError> {
        let log_filter = EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(options.log_filter));
        let logs = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(options.ansi)
            .with_filter(log_filter);
        let exporting = match options.traces.and_then(|config| {
            config
                .traces_url()
                .map(|url| (url, config.service_name.as_str()))
        }) {
            Some((url, service_name)) => Some(crate::otlp::tracer(&url, service_name)?),
            None => None,
        };
        let (tracer_provider, traces) = match exporting {
            Some((provider, tracer)) => {
                let spans = Targets::new()
                    .with_target("mnemo", LevelFilter::INFO)
                    .with_target("tower_http", LevelFilter::DEBUG);
                let layer = tracing_opentelemetry::layer()
                    .with_tracer(tracer)
                    .with_filter(spans);
                (Some(provider), Some(layer))
            }
            None => (None, None),
        };
        let metrics = options.metrics.then(|| Arc::new(Metrics::new()));
        let counting = metrics.as_ref().map(|metrics| {
            MetricsLayer::new(metrics.clone()).with_filter(filter_fn(MetricsLayer::measures))
        });
        tracing_subscriber::registry()
            .with(logs)
            .with(traces)
            .with(counting)
            .try_init()
            .map_err(|error| TelemetryError::AlreadySet(error.to_string()))?;
        Ok(Self {
            tracer_provider,
            metrics,
        })
    }

    /// The metrics the spans are counted into, when they are.
    pub fn metrics(&self) -> Option<Arc<Metrics>> {
        self.metrics.clone()
    }

    /// Sends the spans not sent yet and stops the exporter. Call it while the tokio runtime
    /// still runs (the exporter sends on it), after the work whose spans should be sent.
    pub fn shutdown(self) {
        if let Some(provider) = self.tracer_provider {
            if let Err(error) = provider.shutdown() {
                eprintln!("mnemo: the last traces could not be sent: {error}");
            }
        }
    }
}
