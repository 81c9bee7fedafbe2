//! [`MetricsLayer`]: a `tracing` layer that times the spans named in `mnemo_kernel::spans` and
//! `mnemo_memory_api::spans` and counts them into [`Metrics`] when they close.

use std::sync::Arc;
use std::time::Instant;

use mnemo_kernel::spans as kernel_spans;
use mnemo_memory_api::spans as memory_spans;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::metrics::{
    FailureLabels, JobLabels, Metrics, ModelLabels, OutcomeLabels, StageLabels, TokenLabels,
};

/// What a span measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Measured {
    Ingest,
    Search,
    SearchStage(&'static str),
    Context,
    Job,
    LlmChat,
}

impl Measured {
    /// The measure of a span named `name` from a mnemo crate, if it is one.
    fn of(target: &str, name: &str) -> Option<Self> {
        if !target.starts_with("mnemo") {
            return None;
        }
        Some(match name {
            memory_spans::INGEST => Self::Ingest,
            memory_spans::SEARCH => Self::Search,
            memory_spans::SEARCH_FTS => Self::SearchStage("fts"),
            memory_spans::SEARCH_VECTOR => Self::SearchStage("vector"),
            memory_spans::SEARCH_ENTITY => Self::SearchStage("entity"),
            memory_spans::SEARCH_FEEDBACK => Self::SearchStage("feedback"),
            memory_spans::SEARCH_SENTENCES => Self::SearchStage("sentences"),
            memory_spans::SEARCH_FUSION => Self::SearchStage("fusion"),
            kernel_spans::CONTEXT_ASSEMBLY => Self::Context,
            kernel_spans::JOB => Self::Job,
            kernel_spans::LLM_CHAT => Self::LlmChat,
            _ => return None,
        })
    }
}

/// The fields of a measured span that label or count its metrics.
#[derive(Debug, Default)]
struct SpanFields {
    /// `outcome` (jobs) or `mnemo.ingest.outcome`.
    outcome: Option<String>,
    error_type: Option<String>,
    job: Option<String>,
    model: Option<String>,
    operation: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl SpanFields {
    fn set(&mut self, field: &Field, value: String) {
        match field.name() {
            kernel_spans::JOB_OUTCOME | memory_spans::INGEST_OUTCOME => self.outcome = Some(value),
            kernel_spans::ERROR_TYPE => self.error_type = Some(value),
            "job" => self.job = Some(value),
            kernel_spans::GEN_AI_REQUEST_MODEL => self.model = Some(value),
            "gen_ai.operation.name" => self.operation = Some(value),
            _ => {}
        }
    }

    fn set_count(&mut self, field: &Field, value: u64) {
        match field.name() {
            kernel_spans::GEN_AI_INPUT_TOKENS => self.input_tokens = Some(value),
            kernel_spans::GEN_AI_OUTPUT_TOKENS => self.output_tokens = Some(value),
            _ => {}
        }
    }
}

impl Visit for SpanFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set_count(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.set_count(field, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields arrive here; their Debug is their Display.
        self.set(field, format!("{value:?}"));
    }
}

/// A measured span's start and fields, kept in the span's extensions until it closes.
struct Timing {
    measured: Measured,
    started: Instant,
    fields: SpanFields,
}

/// Turns closed spans into [`Metrics`]: one instrumentation for traces and metrics.
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    metrics: Arc<Metrics>,
}

impl MetricsLayer {
    /// A layer that counts into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }

    /// Whether a callsite can be a measured span: the layer's filter, so that it sees nothing
    /// else.
    pub fn measures(metadata: &tracing::Metadata<'_>) -> bool {
        metadata.is_span() && Measured::of(metadata.target(), metadata.name()).is_some()
    }

    fn count(&self, timing: Timing) {
        let seconds = timing.started.elapsed().as_secs_f64();
        let fields = timing.fields;
        let failed = fields.error_type.is_some();
        let ok_or_error = || OutcomeLabels {
            outcome: if failed { "error" } else { "ok" }.to_owned(),
        };
        let metrics = &self.metrics;
        match timing.measured {
            Measured::Ingest => {
                let outcome = fields.outcome.unwrap_or_else(|| "error".to_owned());
                metrics
                    .ingest
                    .get_or_create(&OutcomeLabels { outcome })
                    .observe(seconds);
            }
            Measured::Search => metrics
                .search
                .get_or_create(&ok_or_error())
                .observe(seconds),
            Measured::SearchStage(stage) => metrics
                .search_stages
                .get_or_create(&StageLabels {
                    stage: stage.to_owned(),
                })
                .observe(seconds),
            Measured::Context => metrics.context.observe(seconds),
            Measured::Job => {
                let labels = JobLabels {
                    job: fields.job.unwrap_or_default(),
                    outcome: fields.outcome.unwrap_or_else(|| "failed".to_owned()),
                };
                metrics.job_runs.get_or_create(&labels).inc();
                metrics
                    .job_durations
                    .get_or_create(&labels)
                    .observe(seconds);
            }
            Measured::LlmChat => {
                let model = fields.model.unwrap_or_default();
                metrics
                    .llm_durations
                    .get_or_create(&ModelLabels {
                        operation: fields.operation.unwrap_or_else(|| "chat".to_owned()),
                        model: model.clone(),
                    })
                    .observe(seconds);
                for (direction, tokens) in [
                    ("input", fields.input_tokens),
                    ("output", fields.output_tokens),
                ] {
                    if let Some(tokens) = tokens {
                        metrics
                            .llm_tokens
                            .get_or_create(&TokenLabels {
                                direction: direction.to_owned(),
                                model: model.clone(),
                            })
                            .inc_by(tokens);
                    }
                }
                if let Some(error_type) = fields.error_type {
                    metrics
                        .llm_failures
                        .get_or_create(&FailureLabels { model, error_type })
                        .inc();
                }
            }
        }
    }
}

impl<S> Layer<S> for MetricsLayer
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
{
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let metadata = attributes.metadata();
        let Some(measured) = Measured::of(metadata.target(), metadata.name()) else {
            return;
        };
        let Some(span) = ctx.span(id) else { return };
        let mut fields = SpanFields::default();
        attributes.record(&mut fields);
        span.extensions_mut().insert(Timing {
            measured,
            started: Instant::now(),
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(timing) = extensions.get_mut::<Timing>() {
            values.record(&mut timing.fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let timing = span.extensions_mut().remove::<Timing>();
        if let Some(timing) = timing {
            self.count(timing);
        }
    }
}
