//! [`MetricsLayer`]: a `tracing` layer that times the spans named in `mnemo_kernel::spans` and
//! `mnemo_memory_api::spans` and counts them into [`Metrics`] when they close; a span of
//! mnemo's that carries `gen_ai.operation.name` is also counted into the GenAI semantic
//! conventions' duration metrics.

use std::sync::Arc;
use std::time::Instant;

use mnemo_kernel::spans as kernel_spans;
use mnemo_kernel::spans::gen_ai;
use mnemo_memory_api::spans as memory_spans;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::metrics::{
    FailureLabels, GenAiLabels, JobLabels, Metrics, ModelLabels, OutcomeLabels, StageLabels,
    TokenLabels,
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

/// What a span is counted into: mnemo's own metric, if any, and whether the GenAI conventions'
/// duration metric too (it declares `gen_ai.operation.name`). `None`: nothing.
fn measures_of(metadata: &tracing::Metadata<'_>) -> Option<(Option<Measured>, bool)> {
    if !metadata.is_span() || !metadata.target().starts_with("mnemo") {
        return None;
    }
    let measured = Measured::of(metadata.target(), metadata.name());
    let gen_ai = metadata.fields().field(gen_ai::OPERATION_NAME).is_some();
    (measured.is_some() || gen_ai).then_some((measured, gen_ai))
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
    provider: Option<String>,
    tool: Option<String>,
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
            gen_ai::OPERATION_NAME => self.operation = Some(value),
            gen_ai::PROVIDER_NAME => self.provider = Some(value),
            gen_ai::TOOL_NAME => self.tool = Some(value),
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
    measured: Option<Measured>,
    gen_ai: bool,
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
        measures_of(metadata).is_some()
    }

    fn count(&self, timing: Timing) {
        let seconds = timing.started.elapsed().as_secs_f64();
        let fields = timing.fields;
        let failed = fields.error_type.is_some();
        let ok_or_error = || OutcomeLabels {
            outcome: if failed { "error" } else { "ok" }.to_owned(),
        };
        let metrics = &self.metrics;
        if timing.gen_ai {
            count_gen_ai(metrics, &fields, seconds);
        }
        let Some(measured) = timing.measured else {
            return;
        };
        match measured {
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
        let Some((measured, gen_ai)) = measures_of(attributes.metadata()) else {
            return;
        };
        let Some(span) = ctx.span(id) else { return };
        let mut fields = SpanFields::default();
        attributes.record(&mut fields);
        span.extensions_mut().insert(Timing {
            measured,
            gen_ai,
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

/// Counts a closed span that carries `gen_ai.operation.name` into the GenAI conventions'
/// `gen_ai.execute_tool.duration` (tool calls) or `gen_ai.client.operation.duration` (every
/// other operation), labelled with the attributes the conventions name for them.
fn count_gen_ai(metrics: &Metrics, fields: &SpanFields, seconds: f64) {
    let Some(operation) = &fields.operation else {
        return;
    };
    let mut labels: GenAiLabels = vec![("gen_ai_operation_name", operation.clone())];
    let mut label = |name: &'static str, value: &Option<String>| {
        if let Some(value) = value {
            labels.push((name, value.clone()));
        }
    };
    let family = if operation == gen_ai::EXECUTE_TOOL {
        label("gen_ai_tool_name", &fields.tool);
        &metrics.gen_ai_tools
    } else {
        label("gen_ai_provider_name", &fields.provider);
        label("gen_ai_request_model", &fields.model);
        &metrics.gen_ai_operations
    };
    label("error_type", &fields.error_type);
    family.get_or_create(&labels).observe(seconds);
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::filter::filter_fn;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;
    use crate::LiveGauges;

    /// The samples of `text` whose series starts with `series`.
    fn lines<'a>(text: &'a str, series: &str) -> Vec<&'a str> {
        text.lines()
            .filter(|line| line.starts_with(series))
            .collect()
    }

    #[test]
    fn spans_of_gen_ai_operations_are_counted_by_the_conventions_names() {
        let metrics = Arc::new(Metrics::new());
        let layer =
            MetricsLayer::new(metrics.clone()).with_filter(filter_fn(MetricsLayer::measures));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let search = tracing::info_span!(
                memory_spans::SEARCH,
                gen_ai.operation.name = gen_ai::SEARCH_MEMORY,
                error.type = tracing::field::Empty,
            );
            search.in_scope(|| {});
            drop(search);
            let chat = tracing::info_span!(
                kernel_spans::LLM_CHAT,
                gen_ai.operation.name = gen_ai::CHAT,
                gen_ai.provider.name = "openai",
                gen_ai.request.model = "small-model",
            );
            drop(chat);
            let tool = tracing::info_span!(
                kernel_spans::TOOL,
                tool = "recall",
                gen_ai.operation.name = gen_ai::EXECUTE_TOOL,
                gen_ai.tool.name = "recall",
                error.type = tracing::field::Empty,
            );
            tool.record(kernel_spans::ERROR_TYPE, "tool_failed");
            drop(tool);
            // Not a GenAI operation, and not a span mnemo measures: not counted.
            drop(tracing::info_span!("extension", extension = "memory"));
        });
        let text = metrics.render(LiveGauges::default());
        // A family's series come in no fixed order.
        let mut operations = lines(&text, "gen_ai_client_operation_duration_seconds_count");
        operations.sort_unstable();
        assert_eq!(
            operations,
            [
                "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"small-model\"} 1",
                "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"search_memory\"} 1",
            ],
            "{text}"
        );
        assert_eq!(
            lines(&text, "gen_ai_execute_tool_duration_seconds_count"),
            ["gen_ai_execute_tool_duration_seconds_count{gen_ai_operation_name=\"execute_tool\",gen_ai_tool_name=\"recall\",error_type=\"tool_failed\"} 1"],
            "{text}"
        );
        // mnemo's own metrics keep counting the same spans under their names.
        assert_eq!(
            lines(&text, "mnemo_search_duration_seconds_count"),
            ["mnemo_search_duration_seconds_count{outcome=\"ok\"} 1"],
            "{text}"
        );
        // The conventions' advised buckets: 10 ms doubling to 81.92 s.
        let buckets = lines(&text, "gen_ai_client_operation_duration_seconds_bucket{");
        let chat = "gen_ai_operation_name=\"chat\"";
        let edges: Vec<_> = buckets
            .iter()
            .filter(|line| line.contains(chat))
            .filter_map(|line| line.split("le=\"").nth(1)?.split('"').next())
            .collect();
        assert_eq!(
            edges,
            [
                "0.01", "0.02", "0.04", "0.08", "0.16", "0.32", "0.64", "1.28", "2.56", "5.12",
                "10.24", "20.48", "40.96", "81.92", "+Inf"
            ],
            "{text}"
        );
    }
}
