//! OpenTelemetry traces over OTLP/HTTP (protobuf): the exporter, and the HTTP client it sends
//! with.
//!
//! The SDK's batch processor exports from a thread of its own, with no tokio runtime, so the
//! asynchronous `reqwest` client cannot run there, and the blocking one would bring its own
//! runtime. [`RuntimeHttpClient`] hands each request to the process's runtime instead and waits
//! for the answer, which needs no runtime on the waiting side.

use std::time::Duration;

use bytes::Bytes;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;

use crate::TelemetryError;

/// The longest one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends the exporter's requests with the workspace's `reqwest` client, on the process's tokio
/// runtime.
#[derive(Debug)]
pub struct RuntimeHttpClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl RuntimeHttpClient {
    /// A client that runs its requests on `runtime`.
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS set-up).
    pub fn new(runtime: tokio::runtime::Handle) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder().timeout(EXPORT_TIMEOUT).build()?;
        Ok(Self { client, runtime })
    }
}

#[async_trait::async_trait]
impl HttpClient for RuntimeHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = sent.await??;
        let mut response = Response::builder().status(status).body(body)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

/// A tracer provider that batches spans and sends them to `traces_url` as OTLP protobuf, each
/// span carrying `service.name` = `service_name`, and its tracer.
///
/// # Errors
/// [`TelemetryError::NoRuntime`] outside a tokio runtime; [`TelemetryError::Exporter`].
pub fn tracer(
    traces_url: &str,
    service_name: &str,
) -> Result<(SdkTracerProvider, SdkTracer), TelemetryError> {
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| TelemetryError::NoRuntime)?;
    let failed = |reason: String| TelemetryError::Exporter {
        endpoint: traces_url.to_owned(),
        reason,
    };
    let client = RuntimeHttpClient::new(runtime).map_err(|error| failed(error.to_string()))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(traces_url)
        .with_timeout(EXPORT_TIMEOUT)
        .with_http_client(client)
        .build()
        .map_err(|error| failed(error.to_string()))?;
    let resource = Resource::builder()
        .with_service_name(service_name.to_owned())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("mnemo");
    Ok((provider, tracer))
}
