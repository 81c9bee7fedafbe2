//! Dispatch: the kernel's calls into the extensions' roles: tool calls, context gathering
//! and the delivery of events to their handlers.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use serde_json::Value;
use tracing::Instrument;

use super::{panic_message, Kernel};
use crate::extension::{ContextRequest, ToolError, ToolScope, ToolSpec};
use crate::spans::gen_ai;

impl Kernel {
    /// Every tool of every enabled extension.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.inner
            .tools
            .iter()
            .map(|(_, spec)| spec.clone())
            .collect()
    }

    /// Calls a tool by name as the agent would: arguments are checked against its schema first.
    ///
    /// # Errors
    /// [`ToolError`] naming an unknown tool, a bad argument, or the tool's own failure.
    pub async fn call_tool(
        &self,
        scope: &ToolScope,
        name: &str,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        let Some(&position) = self.inner.tool_index.get(name) else {
            return Err(ToolError::UnknownTool(name.to_owned()));
        };
        let (extension_index, spec) = &self.inner.tools[position];
        let arguments = if arguments.is_null() {
            Value::Object(serde_json::Map::new())
        } else {
            arguments
        };
        scope
            .validate()
            .map_err(|error| ToolError::invalid(name, format!("the caller's {error}")))?;
        crate::schema::check(&spec.parameters, &arguments)
            .map_err(|reason| ToolError::invalid(name, reason))?;
        let extension = &self.inner.extensions[*extension_index];
        let Some(provider) = extension.tool_provider() else {
            return Err(ToolError::UnknownTool(name.to_owned()));
        };
        let span = tracing::info_span!(
            crate::spans::TOOL,
            extension = %extension.name(),
            tool = %name,
            otel.name = %format_args!("{} {name}", gen_ai::EXECUTE_TOOL),
            gen_ai.operation.name = gen_ai::EXECUTE_TOOL,
            gen_ai.tool.name = %name,
            error.type = tracing::field::Empty,
        );
        match AssertUnwindSafe(provider.call_tool(&self.inner.ctx, scope, name, arguments))
            .catch_unwind()
            .instrument(span.clone())
            .await
        {
            Ok(result) => {
                if let Err(error) = &result {
                    span.record(crate::spans::ERROR_TYPE, tool_error_type(error));
                }
                result
            }
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(extension = %extension.name(), tool = %name, %message, "tool panicked");
                span.record(crate::spans::ERROR_TYPE, "panic");
                Err(ToolError::failed(name, "the tool panicked; see the log"))
            }
        }
    }

    /// Every context block for `request`, in extension order, as (extension, block).
    ///
    /// A provider that fails or panics is logged and left out.
    pub async fn gather_context(&self, request: &ContextRequest) -> Vec<(String, String)> {
        let span = tracing::info_span!(
            crate::spans::CONTEXT_ASSEMBLY,
            blocks = tracing::field::Empty,
            gen_ai.operation.name = gen_ai::RETRIEVAL,
        );
        let blocks = self.gather_blocks(request).instrument(span.clone()).await;
        span.record("blocks", crate::spans::count(blocks.len()));
        blocks
    }

    /// Every context block, each provider's call in its own `context` span.
    async fn gather_blocks(&self, request: &ContextRequest) -> Vec<(String, String)> {
        let mut blocks = Vec::new();
        for extension in &self.inner.extensions {
            let Some(provider) = extension.context_provider() else {
                continue;
            };
            let span = tracing::info_span!("context", extension = %extension.name());
            match AssertUnwindSafe(provider.context(&self.inner.ctx, request))
                .catch_unwind()
                .instrument(span)
                .await
            {
                Ok(Ok(Some(block))) if !block.trim().is_empty() => {
                    blocks.push((extension.name().to_owned(), block));
                }
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(extension = %extension.name(), %error, "context provider failed; block left out");
                }
                Err(panic) => {
                    let message = panic_message(panic.as_ref());
                    tracing::error!(extension = %extension.name(), %message, "context provider panicked; block left out");
                }
            }
        }
        blocks
    }

    pub(super) fn spawn_subscribers(&self) {
        let mut tasks = Vec::new();
        for extension in &self.inner.extensions {
            let Some(handler) = extension.event_handler() else {
                continue;
            };
            let router = self.inner.ctx.router().clone();
            let mut receiver = router.subscribe(extension.name(), handler.topics());
            let extension = extension.clone();
            let ctx = self.inner.ctx.clone();
            tasks.push(tokio::spawn(async move {
                while let Some(event) = receiver.recv().await {
                    if let Some(handler) = extension.event_handler() {
                        let span = tracing::info_span!(
                            "event",
                            extension = %extension.name(),
                            event_id = %event.id,
                            topic = %event.topic()
                        );
                        match AssertUnwindSafe(handler.handle(&ctx, &event))
                            .catch_unwind()
                            .instrument(span)
                            .await
                        {
                            Ok(Ok(())) => {}
                            Ok(Err(error)) => tracing::warn!(
                                extension = %extension.name(), event_id = %event.id, %error,
                                "event handler failed"
                            ),
                            Err(panic) => tracing::error!(
                                extension = %extension.name(), event_id = %event.id,
                                message = %panic_message(panic.as_ref()),
                                "event handler panicked"
                            ),
                        }
                    }
                    router.delivered();
                }
            }));
        }
        *self
            .inner
            .subscriber_tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = tasks;
    }
}

/// The `error.type` of a failed tool call, one low-cardinality name per kind of failure.
fn tool_error_type(error: &ToolError) -> &'static str {
    match error {
        ToolError::UnknownTool(_) => "unknown_tool",
        ToolError::InvalidArguments { .. } => "invalid_arguments",
        ToolError::Failed { .. } => "tool_failed",
    }
}
