//! `mnemo mcp`: a Model Context Protocol server on stdio (the official Rust SDK, rmcp) offering
//! every tool of the enabled extensions, so any MCP client gets memory.
//!
//! Tools are known only at run time (they come from extensions), so the handler implements
//! `list_tools` and `call_tool` itself rather than with rmcp's macros. Every call acts for the
//! configured user (`--user`), in one session per server run.

use std::sync::Arc;

use mnemo_kernel::{Kernel, ToolError, ToolScope};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

/// The MCP face of a running kernel.
struct MnemoServer {
    kernel: Kernel,
    user: String,
    chat: Option<String>,
    session: String,
}

impl ServerHandler for MnemoServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mnemo", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Long-term memory. Use the memory tools to remember what the user tells you \
                 and to search what you know before answering.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .kernel
            .tools()
            .into_iter()
            .map(|spec| {
                let schema = spec.parameters.as_object().cloned().unwrap_or_default();
                Tool::new(spec.name, spec.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let scope = ToolScope {
            user_id: self.user.clone(),
            session_id: Some(self.session.clone()),
            chat_id: self.chat.clone(),
            at: self.kernel.context().now(),
        };
        let result = self
            .kernel
            .call_tool(&scope, &request.name, arguments)
            .await;
        match result {
            Ok(value) => {
                Ok(CallToolResult::success(vec![ContentBlock::text(value.to_string())]).into())
            }
            Err(ToolError::UnknownTool(name)) => Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                None,
            )),
            // A tool that ran and failed, or bad arguments: the client shows the message.
            Err(error) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(error.to_string())]).into())
            }
        }
    }
}

/// Serves MCP on stdin/stdout until the client closes stdin, then shuts the kernel down.
pub(crate) async fn serve(
    kernel: Kernel,
    user: String,
    chat: Option<String>,
) -> anyhow::Result<()> {
    let session = format!("mcp-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%6f"));
    let server = MnemoServer {
        kernel: kernel.clone(),
        user,
        chat,
        session,
    };
    let running = server.serve(rmcp::transport::stdio()).await?;
    let ended = running.waiting().await;
    kernel.shutdown().await;
    ended?;
    Ok(())
}
