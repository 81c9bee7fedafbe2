//! The Prometheus metrics of `mnemo serve`: what [`crate::MetricsLayer`] counts from closed
//! spans, plus gauges read when the metrics are scraped ([`LiveGauges`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::render`]'s text (OpenMetrics, which Prometheus reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Latency buckets, in seconds: 0.5 ms doubling to about 16 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_5, 2.0, 16))
}

/// The buckets the GenAI semantic conventions advise for their duration histograms, in
/// seconds: 10 ms doubling to 81.92 s.
fn gen_ai_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

type Latencies<L> = Family<L, Histogram, fn() -> Histogram>;

/// The labels of a GenAI metric: the conventions' attribute names as OpenTelemetry writes them
/// for Prometheus (`gen_ai.operation.name` is `gen_ai_operation_name`), only those the span
/// had, in a fixed order.
pub(crate) type GenAiLabels = Vec<(&'static str, String)>;

/// An empty family of histograms with the GenAI conventions' buckets.
fn gen_ai_latencies() -> Latencies<GenAiLabels> {
    Family::new_with_constructor(gen_ai_histogram as fn() -> Histogram)
}

/// An empty family of latency histograms.
fn latencies<L: Clone + std::hash::Hash + Eq>() -> Latencies<L> {
    Family::new_with_constructor(latency_histogram as fn() -> Histogram)
}

/// How a piece of work ended (`stored`/`skipped`/`error` for ingest, `ok`/`error` otherwise).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    pub(crate) outcome: String,
}

/// One stage of a search: `fts`, `vector`, `entity` or `fusion`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StageLabels {
    pub(crate) stage: String,
}

/// A job's run: the job, and `ok`, `partial` or `failed`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobLabels {
    pub(crate) job: String,
    pub(crate) outcome: String,
}

/// A model: the operation (`chat`) and the model asked for.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ModelLabels {
    pub(crate) operation: String,
    pub(crate) model: String,
}

/// Tokens of a model: `input` or `output`, and the model.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TokenLabels {
    pub(crate) direction: String,
    pub(crate) model: String,
}

/// A failed model call: the model and the span's `error.type`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct FailureLabels {
    pub(crate) model: String,
    pub(crate) error_type: String,
}

/// Values read when the metrics are scraped, not counted from spans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveGauges {
    /// Memories waiting for their vector (the indexer's queue); `None` when it cannot be read.
    pub index_queue: Option<i64>,
    /// Event deliveries queued or being handled on the kernel's bus.
    pub events_in_flight: i64,
}

/// The registry and every metric in it.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub(crate) ingest: Latencies<OutcomeLabels>,
    pub(crate) search: Latencies<OutcomeLabels>,
    pub(crate) search_stages: Latencies<StageLabels>,
    pub(crate) context: Histogram,
    pub(crate) job_runs: Family<JobLabels, Counter>,
    pub(crate) job_durations: Latencies<JobLabels>,
    pub(crate) llm_durations: Latencies<ModelLabels>,
    pub(crate) llm_tokens: Family<TokenLabels, Counter>,
    pub(crate) llm_failures: Family<FailureLabels, Counter>,
    /// `gen_ai.client.operation.duration`: every span with a `gen_ai.operation.name` but tools.
    pub(crate) gen_ai_operations: Latencies<GenAiLabels>,
    /// `gen_ai.execute_tool.duration`: the tool calls.
    pub(crate) gen_ai_tools: Latencies<GenAiLabels>,
    index_queue: Gauge,
    events_in_flight: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric, registered and at zero.
    pub fn new() -> Self {
        let mut metrics = Self {
            registry: Registry::default(),
            ingest: latencies(),
            search: latencies(),
            search_stages: latencies(),
            context: latency_histogram(),
            job_runs: Family::default(),
            job_durations: latencies(),
            llm_durations: latencies(),
            llm_tokens: Family::default(),
            llm_failures: Family::default(),
            gen_ai_operations: gen_ai_latencies(),
            gen_ai_tools: gen_ai_latencies(),
            index_queue: Gauge::default(),
            events_in_flight: Gauge::default(),
        };
        let registry = &mut metrics.registry;
        registry.register(
            "mnemo_ingest_duration_seconds",
            "Storing one conversation event on the hot path, by outcome (stored, skipped, error)",
            metrics.ingest.clone(),
        );
        registry.register(
            "mnemo_search_duration_seconds",
            "One memory search, candidate lists to loaded hits, by outcome (ok, error)",
            metrics.search.clone(),
        );
        registry.register(
            "mnemo_search_stage_duration_seconds",
            "One stage of a search: a candidate list (fts, vector, entity, feedback) or their fusion",
            metrics.search_stages.clone(),
        );
        registry.register(
            "mnemo_context_duration_seconds",
            "Assembling the context blocks of every context provider for one request",
            metrics.context.clone(),
        );
        registry.register(
            "mnemo_job_runs",
            "Runs of each job, by outcome (ok, partial: some items failed, failed)",
            metrics.job_runs.clone(),
        );
        registry.register(
            "mnemo_job_duration_seconds",
            "How long each job's runs took, by outcome",
            metrics.job_durations.clone(),
        );
        registry.register(
            "mnemo_llm_request_duration_seconds",
            "Requests to the model server, retries included, by operation and model",
            metrics.llm_durations.clone(),
        );
        registry.register(
            "mnemo_llm_tokens",
            "Tokens the model server counted, by direction (input, output) and model",
            metrics.llm_tokens.clone(),
        );
        registry.register(
            "mnemo_llm_failures",
            "Model requests that failed after their retries, by model and error type",
            metrics.llm_failures.clone(),
        );
        // The GenAI semantic conventions' metrics, beside mnemo's own (which keep their names).
        registry.register(
            "gen_ai_client_operation_duration_seconds",
            "gen_ai.client.operation.duration: GenAI operations (chat, embeddings, retrieval, \
             search_memory, create_memory), by gen_ai.operation.name, \
             gen_ai.provider.name, gen_ai.request.model and error.type",
            metrics.gen_ai_operations.clone(),
        );
        registry.register(
            "gen_ai_execute_tool_duration_seconds",
            "gen_ai.execute_tool.duration: tool calls, by gen_ai.tool.name and error.type",
            metrics.gen_ai_tools.clone(),
        );
        registry.register(
            "mnemo_index_queue_pending",
            "Memories waiting for their vector (the indexer's queue), read at scrape time",
            metrics.index_queue.clone(),
        );
        registry.register(
            "mnemo_events_in_flight",
            "Event deliveries queued or being handled on the kernel's bus, read at scrape time",
            metrics.events_in_flight.clone(),
        );
        metrics
    }

    /// Every metric as OpenMetrics text ([`CONTENT_TYPE`]), with the live gauges set from
    /// `live` first.
    pub fn render(&self, live: LiveGauges) -> String {
        if let Some(pending) = live.index_queue {
            self.index_queue.set(pending);
        }
        self.events_in_flight.set(live.events_in_flight);
        let mut text = String::new();
        // Writing into a String cannot fail; an encoding error would leave the text cut short.
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(%error, "cannot encode the metrics");
        }
        text
    }
}
