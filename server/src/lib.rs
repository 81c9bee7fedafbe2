//! `mnemo serve`: memory as an HTTP service for agents in any language. One long-lived kernel
//! (scheduled jobs, indexer, consolidation) serves many users and chats at once through:
//!
//! - a JSON API under `/v1` ([`routes`]), described by the OpenAPI document at `/openapi.json`;
//! - the Model Context Protocol over streamable HTTP at `/mcp` ([`mcp`]);
//! - the web inspector at `/` ([`inspector`]), a page that reads the API with the key a person
//!   types in;
//! - `/healthz` and `/readyz` for probes;
//! - Prometheus metrics at `/metrics` ([`mnemo_telemetry::Metrics`]), readable as
//!   `[telemetry] metrics` says: without a key, with an admin key, or not at all.
//!
//! Every `/v1` and `/mcp` request needs an API key ([`keys`], checked by [`auth`]); the user is
//! the key's, never a request field's. Requests have a body limit and a timeout; shutdown stops
//! taking connections, lets the requests in flight finish, then drains the kernel's queues.

mod auth;
mod error;
mod inspector;
pub mod keys;
pub mod mcp;
mod mcp_sessions;
mod routes;
pub mod sampling;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use mnemo_kernel::host::{Kernel, MetricsAccess};
use mnemo_memory_api::MemoryHost;
use mnemo_telemetry::Metrics;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use auth::ACT_FOR_HEADER;
pub use error::ApiError;
pub use keys::{KeyError, KeyFileImport, KeyRecord, KeyStore, NewKey};
pub use sampling::SamplingLlm;

/// How the server listens and what it accepts.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address and port; port 0 picks a free one (the bound address is printed).
    pub listen: SocketAddr,
    /// The longest a `/v1` request may take before it is answered with `timeout`.
    pub request_timeout: Duration,
    /// The largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Host names MCP requests may name in `Host`, beside loopback and the listen address.
    pub allowed_hosts: Vec<String>,
    /// The metrics served at `/metrics`, counted from spans by the process's subscriber;
    /// `None`: `/metrics` answers 404.
    pub metrics: Option<Arc<Metrics>>,
    /// Who may read `/metrics` (`[telemetry] metrics`).
    pub metrics_access: MetricsAccess,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            request_timeout: Duration::from_secs(30),
            max_body_bytes: 16 << 20,
            allowed_hosts: Vec::new(),
            metrics: None,
            metrics_access: MetricsAccess::default(),
        }
    }
}

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) kernel: Kernel,
    pub(crate) memory: Arc<dyn MemoryHost>,
    pub(crate) keys: KeyStore,
    pub(crate) timeout: Duration,
    /// `None` when `/metrics` is off.
    pub(crate) metrics: Option<Arc<Metrics>>,
    pub(crate) metrics_access: MetricsAccess,
}

/// A server bound to its address, not yet serving.
pub struct Server {
    listener: tokio::net::TcpListener,
    app: Router,
    kernel: Kernel,
    mcp_stop: CancellationToken,
}

impl Server {
    /// Binds the address and builds the routes over a started kernel, whose memory store keeps
    /// the API keys (a `keys.json` in the data directory is imported first, once). With
    /// `sampling` (the kernel's model, when no `[llm]` is configured), MCP clients that offer
    /// sampling lend it their model, each for its own user.
    ///
    /// # Errors
    /// The memory extension is not enabled, `keys.json` cannot be imported, or the address
    /// cannot be bound.
    pub async fn bind(
        kernel: Kernel,
        options: &ServeOptions,
        sampling: Option<Arc<SamplingLlm>>,
    ) -> anyhow::Result<Self> {
        let memory = kernel
            .context()
            .services()
            .get::<dyn MemoryHost>()
            .context("`mnemo serve` needs the memory extension; enable [extensions.memory]")?;
        let keys = KeyStore::new(memory.clone());
        keys::import_announced(&keys, kernel.context().data_dir()).await?;
        if !keys.any_live().await? {
            tracing::warn!(
                "no API keys yet: every request will be refused; `mnemo keys create --user U` makes one"
            );
        }
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .with_context(|| format!("cannot listen on {}", options.listen))?;
        let state = Arc::new(AppState {
            kernel: kernel.clone(),
            memory,
            keys,
            timeout: options.request_timeout,
            metrics: options
                .metrics
                .clone()
                .filter(|_| options.metrics_access != MetricsAccess::Off),
            metrics_access: options.metrics_access,
        });
        let mcp_stop = CancellationToken::new();
        let mut hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
            options.listen.ip().to_string(),
        ];
        hosts.extend(options.allowed_hosts.iter().cloned());
        let handler = mcp::McpHandler::over_http(kernel.clone(), sampling);
        let mut mcp_config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_cancellation_token(mcp_stop.clone())
            .with_max_request_body_bytes(options.max_body_bytes);
        // Sessions live in the store: a session opened on one server continues on any other.
        mcp_config.session_store =
            Some(Arc::new(mcp_sessions::StoredSessions(state.memory.clone())));
        let mcp_service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            mcp_config,
        );
        let mcp_routes = Router::new().nest_service("/mcp", mcp_service).layer(
            axum::middleware::from_fn_with_state(state.clone(), auth::require_key),
        );
        let api = routes::router(state.clone())
            .layer(axum::middleware::from_fn_with_state(state, time_limit));
        let app = api
            .merge(mcp_routes)
            .merge(inspector::router())
            .layer(DefaultBodyLimit::max(options.max_body_bytes))
            .layer(tower_http::trace::TraceLayer::new_for_http());
        Ok(Self {
            listener,
            app,
            kernel,
            mcp_stop,
        })
    }

    /// The address it listens on.
    ///
    /// # Errors
    /// The socket cannot say.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` resolves; then, within the kernel's shutdown grace
    /// (`[kernel] shutdown_grace_ms`) counted from that moment: stops taking connections, ends
    /// MCP sessions, waits for requests in flight (for half the grace at most: one still
    /// running then goes on in its connection's task, and either commits and answers or fails
    /// as the store closes), and shuts the kernel down with the time left.
    ///
    /// # Errors
    /// Serving fails.
    pub async fn run(
        self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let mcp_stop = self.mcp_stop.clone();
        let (stopping, stopped) = tokio::sync::oneshot::channel();
        let serving = axum::serve(self.listener, self.app).with_graceful_shutdown(async move {
            stop.await;
            let _ = stopping.send(tokio::time::Instant::now());
            // Open MCP streams would hold the graceful shutdown for ever.
            mcp_stop.cancel();
        });
        let grace = self.kernel.shutdown_grace();
        let served = async {
            let serving = std::future::IntoFuture::into_future(serving);
            tokio::pin!(serving);
            tokio::select! {
                served = &mut serving => (served, None),
                Ok(at) = stopped => {
                    let drained = tokio::time::timeout_at(at + grace / 2, &mut serving).await;
                    match drained {
                        Ok(served) => (served, Some(at)),
                        Err(_) => {
                            tracing::warn!(
                                "requests still in flight after half the shutdown grace; the \
                                 kernel stops beside them"
                            );
                            (Ok(()), Some(at))
                        }
                    }
                }
            }
        };
        let (served, signalled) = served.await;
        let deadline = signalled.unwrap_or_else(tokio::time::Instant::now) + grace;
        let _ = tokio::time::timeout_at(deadline, self.kernel.context().router().settle()).await;
        self.kernel.shutdown_by(deadline).await;
        served.context("the HTTP server failed")
    }
}

/// Answers a request that takes longer than the configured timeout with 503 `timeout`.
async fn time_limit(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(state.timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!(
                "the request took longer than {} s; what it had done stands",
                state.timeout.as_secs_f64()
            ),
        )
        .into_response(),
    }
}
