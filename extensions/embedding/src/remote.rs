//! The remote provider: any server speaking OpenAI's `POST /embeddings` protocol (OpenAI, Ollama,
//! vLLM, llama.cpp server).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tracing::Instrument as _;

use crate::config::EmbeddingConfig;
use mnemo_embedding_api::{EmbeddingApi, EmbeddingError, EmbeddingHealth};
use mnemo_kernel::spans::{self as kernel_spans, gen_ai};
use mnemo_kernel::{retry_after, RetryPolicy};

/// Longest part of an error body kept in an error message, in characters.
const ERROR_BODY_LIMIT: usize = 300;

/// Sends texts to `{base_url}/embeddings` and returns L2-normalised vectors.
///
/// The vector size is the configured `dimensions` (then also sent to the server, for Matryoshka
/// models) or the known size of the model; every answer is checked against it.
#[derive(Clone)]
pub struct RemoteEmbedder {
    /// The HTTP client, or why it could not be built.
    http: Result<reqwest::Client, String>,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    request_dimensions: Option<u32>,
    dimensions: Option<usize>,
    model_id: String,
    batch_size: usize,
    timeout_secs: u64,
    retry: RetryPolicy,
}

impl fmt::Debug for RemoteEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteEmbedder")
            .field("endpoint", &self.endpoint)
            .field("model_id", &self.model_id)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("batch_size", &self.batch_size)
            .field("timeout_secs", &self.timeout_secs)
            .finish()
    }
}

impl RemoteEmbedder {
    /// A provider for the server and model in `config` (`base_url`, `model`, `api_key`,
    /// `dimensions`, `batch_size`, `timeout_secs`). No I/O; problems (an HTTP client that cannot
    /// be built, an unknown vector size) show in [`EmbeddingApi::health`].
    pub fn new(config: &EmbeddingConfig) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.timeout_secs))
            .build()
            .map_err(|err| format!("cannot build the HTTP client: {err}"));
        let model_id = match config.dimensions {
            Some(dimensions) => format!("{}@{dimensions}", config.model),
            None => config.model.clone(),
        };
        Self {
            http,
            endpoint: format!("{}/embeddings", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
            request_dimensions: config.dimensions,
            dimensions: config.remote_dimensions(),
            model_id,
            batch_size: config.batch_size.max(1),
            timeout_secs: config.timeout_secs,
            retry: RetryPolicy::new(config.max_retries, config.retry_base_ms),
        }
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn ready(&self) -> Result<(&reqwest::Client, usize), EmbeddingError> {
        let http = self.http.as_ref().map_err(|reason| {
            EmbeddingError::Unavailable(format!("remote embeddings: {reason}"))
        })?;
        let dimensions = self.dimensions.ok_or_else(|| {
            EmbeddingError::Unavailable(format!(
                "remote embeddings: the vector size of model `{}` is unknown; set `dimensions` \
                 in [extensions.embedding]",
                self.model
            ))
        })?;
        Ok((http, dimensions))
    }

    fn transport_error(&self, err: &reqwest::Error) -> EmbeddingError {
        if err.is_timeout() {
            EmbeddingError::Timeout(self.timeout_secs)
        } else if err.is_connect() {
            EmbeddingError::Unavailable(format!("cannot reach {}: {err}", self.endpoint))
        } else {
            EmbeddingError::Failed(format!("request to {} failed: {err}", self.endpoint))
        }
    }

    /// Runs `request`, one embeddings request (retries included), inside its span after the
    /// GenAI conventions (`mnemo_kernel::spans::LLM_EMBEDDINGS`, exported as
    /// `embeddings {model}`), which records how it failed.
    async fn traced<T>(
        &self,
        dimensions: usize,
        request: impl Future<Output = Result<T, EmbeddingError>>,
    ) -> Result<T, EmbeddingError> {
        let span = tracing::info_span!(
            kernel_spans::LLM_EMBEDDINGS,
            otel.name = %format_args!("{} {}", gen_ai::EMBEDDINGS, self.model),
            otel.kind = "client",
            gen_ai.operation.name = gen_ai::EMBEDDINGS,
            gen_ai.provider.name = "openai",
            gen_ai.request.model = %self.model,
            gen_ai.embeddings.dimension.count = kernel_spans::count(dimensions),
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let result = request.instrument(span.clone()).await;
        if let Err(error) = &result {
            span.record(kernel_spans::ERROR_TYPE, error_type(error));
        }
        result
    }

    /// [`RemoteEmbedder::request`], tried again by the retry policy while the server says
    /// "later" (429, 5xx) or cannot be reached.
    async fn request_with_retries(
        &self,
        http: &reqwest::Client,
        dimensions: usize,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let mut retry = 0;
        loop {
            match self.request(http, dimensions, texts).await {
                Ok(vectors) => return Ok(vectors),
                Err(failure) if failure.transient && retry < self.retry.max_retries => {
                    let delay = self.retry.delay(retry, failure.retry_after);
                    tracing::warn!(
                        error = %failure.error, retry = retry + 1,
                        delay_ms = delay.as_millis() as u64,
                        "the embedding server failed; trying again"
                    );
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
                Err(failure) => return Err(failure.error),
            }
        }
    }

    /// One request for `texts`.
    async fn request(
        &self,
        http: &reqwest::Client,
        dimensions: usize,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, Failure> {
        let mut body = json!({"model": self.model, "input": texts});
        if let Some(requested) = self.request_dimensions {
            body["dimensions"] = json!(requested);
        }
        let mut request = http.post(&self.endpoint).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let transport = |err: reqwest::Error| Failure {
            // A timed-out request may still be running on the server: not sent again.
            transient: !err.is_timeout(),
            error: self.transport_error(&err),
            retry_after: None,
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let text = response.text().await.map_err(transport)?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(Failure::last(EmbeddingError::Failed(format!(
                "the server has no {} (404 Not Found); does base_url need to end in /v1?",
                self.endpoint
            ))));
        }
        if !status.is_success() {
            return Err(Failure {
                error: EmbeddingError::Failed(format!(
                    "{} answered {status}: {}",
                    self.endpoint,
                    excerpt(&text)
                )),
                transient: RetryPolicy::is_transient_status(status.as_u16()),
                retry_after,
            });
        }
        let reply: Value = serde_json::from_str(&text).map_err(|err| {
            Failure::last(EmbeddingError::Failed(format!(
                "{} answered with something other than JSON ({err}): {}",
                self.endpoint,
                excerpt(&text)
            )))
        })?;
        record_usage(&reply);
        parse_reply(&reply, texts.len(), dimensions).map_err(Failure::last)
    }
}

/// Writes what the server said about the reply (its model, the tokens it read) into the
/// current embeddings span.
fn record_usage(reply: &Value) {
    let span = tracing::Span::current();
    if let Some(model) = reply.get("model").and_then(Value::as_str) {
        span.record("gen_ai.response.model", model);
    }
    let tokens = reply
        .get("usage")
        .and_then(|usage| usage.get("prompt_tokens"))
        .and_then(Value::as_u64);
    if let Some(tokens) = tokens {
        span.record(
            kernel_spans::GEN_AI_INPUT_TOKENS,
            kernel_spans::count(tokens),
        );
    }
}

/// The `error.type` of a failed embeddings request.
fn error_type(error: &EmbeddingError) -> &'static str {
    match error {
        EmbeddingError::Unavailable(_) => "unavailable",
        EmbeddingError::Timeout(_) => "timeout",
        _ => "failed",
    }
}

/// A failed request, and whether another try may succeed.
struct Failure {
    error: EmbeddingError,
    transient: bool,
    retry_after: Option<Duration>,
}

impl Failure {
    /// A failure another try would repeat.
    fn last(error: EmbeddingError) -> Self {
        Self {
            error,
            transient: false,
            retry_after: None,
        }
    }
}

/// Reads `data[].embedding`, places each vector by its `index`, checks count and size, and
/// L2-normalises.
fn parse_reply(
    reply: &Value,
    n_inputs: usize,
    dimensions: usize,
) -> Result<Vec<Vec<f32>>, EmbeddingError> {
    let protocol = |what: String| EmbeddingError::Failed(format!("unexpected reply: {what}"));
    let data = reply
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| protocol("no `data` array".to_owned()))?;
    if data.len() != n_inputs {
        return Err(protocol(format!(
            "{} embeddings for {n_inputs} inputs",
            data.len()
        )));
    }
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; n_inputs];
    for (item_idx, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|index| usize::try_from(index).ok())
            .ok_or_else(|| protocol(format!("`data[{item_idx}].index` is missing")))?;
        let slot = vectors.get_mut(index).ok_or_else(|| {
            protocol(format!(
                "`data[{item_idx}].index` is {index}, past {n_inputs} inputs"
            ))
        })?;
        if slot.is_some() {
            return Err(protocol(format!("index {index} appears twice")));
        }
        let numbers = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                protocol(format!(
                    "`data[{item_idx}].embedding` is not an array of numbers (set no \
                     `encoding_format`)"
                ))
            })?;
        if numbers.len() != dimensions {
            return Err(protocol(format!(
                "`data[{item_idx}].embedding` has {} dimensions, expected {dimensions}",
                numbers.len()
            )));
        }
        let vector = numbers
            .iter()
            .map(|number| number.as_f64().map(|value| value as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| protocol(format!("`data[{item_idx}].embedding` holds a non-number")))?;
        *slot = Some(normalize(vector));
    }
    // Every slot is filled: as many items as inputs, each index in range and seen once.
    Ok(vectors.into_iter().flatten().collect())
}

/// Scales `vector` to unit length (a zero vector stays zero).
fn normalize(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
    if norm > 1e-12 {
        for value in &mut vector {
            *value /= norm;
        }
    }
    vector
}

fn excerpt(text: &str) -> String {
    match text.char_indices().nth(ERROR_BODY_LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[async_trait]
impl EmbeddingApi for RemoteEmbedder {
    /// The configured `dimensions`, or the model's known size (0 if neither is known, in which
    /// case [`EmbeddingApi::health`] is unavailable).
    fn dimensions(&self) -> usize {
        self.dimensions.unwrap_or(0)
    }

    /// `model`, or `model@dimensions` when `dimensions` is configured.
    fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Ready when configured correctly; the server itself is not contacted, so a down server
    /// shows in the errors of [`EmbeddingApi::embed`].
    fn health(&self) -> EmbeddingHealth {
        match self.ready() {
            Ok(_) => EmbeddingHealth::Ready,
            Err(err) => EmbeddingHealth::Unavailable {
                reason: err.to_string(),
            },
        }
    }

    /// One request, not retried: a search waiting for its query's vector falls back to words
    /// at once rather than wait for a struggling server.
    async fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let (http, dimensions) = self.ready()?;
        let request = async {
            self.request(http, dimensions, &[text.to_owned()])
                .await
                .map_err(|failure| failure.error)
        };
        let mut vectors = self.traced(dimensions, request).await?;
        vectors
            .pop()
            .ok_or_else(|| EmbeddingError::Failed("the server returned no vector".to_owned()))
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let (http, dimensions) = self.ready()?;
        let mut vectors = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.batch_size) {
            let request = self.request_with_retries(http, dimensions, chunk);
            vectors.extend(self.traced(dimensions, request).await?);
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_ordered_by_index_and_normalised() {
        let reply = json!({"data": [
            {"index": 1, "embedding": [0.0, 2.0]},
            {"index": 0, "embedding": [3.0, 4.0]},
        ]});
        let vectors = parse_reply(&reply, 2, 2).expect("valid reply");
        assert_eq!(vectors, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
    }

    #[test]
    fn malformed_replies_are_errors() {
        let cases = [
            (json!({}), "no `data`"),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}]}),
                "1 embeddings for 2",
            ),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
                "twice",
            ),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 5, "embedding": [1.0]}]}),
                "past 2",
            ),
            (
                json!({"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]}),
                "expected 1",
            ),
            (
                json!({"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1.0]}]}),
                "not an array",
            ),
        ];
        for (reply, expected) in cases {
            let error = parse_reply(&reply, 2, 1).expect_err("malformed reply");
            assert!(error.to_string().contains(expected), "{error} / {expected}");
        }
    }

    #[test]
    fn model_id_names_the_requested_size() {
        let mut config = EmbeddingConfig {
            model: "text-embedding-3-large".to_owned(),
            ..EmbeddingConfig::default()
        };
        assert_eq!(
            RemoteEmbedder::new(&config).model_id(),
            "text-embedding-3-large"
        );
        assert_eq!(RemoteEmbedder::new(&config).dimensions(), 3072);
        config.dimensions = Some(256);
        let embedder = RemoteEmbedder::new(&config);
        assert_eq!(embedder.model_id(), "text-embedding-3-large@256");
        assert_eq!(embedder.dimensions(), 256);
        assert_eq!(embedder.health(), EmbeddingHealth::Ready);

        config.model = "nomic-embed-text".to_owned();
        config.dimensions = None;
        let unknown = RemoteEmbedder::new(&config);
        assert!(
            matches!(unknown.health(), EmbeddingHealth::Unavailable { reason } if reason.contains("dimensions"))
        );
    }
}
