//! The Model Context Protocol face of a running kernel: every tool of the enabled extensions,
//! the memory context as a prompt (`memory_context`, for a `query`) and as a resource
//! (`mnemo://memory/context`). Served on stdio by `mnemo mcp` for one configured user, and over
//! streamable HTTP by `mnemo serve` at `/mcp`, where the user comes from the API key (an admin
//! key names it in `X-Mnemo-User`) and never from tool arguments; the chat, if any, from the
//! `X-Mnemo-Chat` header.
//!
//! Tools are known only at run time (they come from extensions), so the handler implements
//! `list_tools` and `call_tool` itself rather than with rmcp's macros.

use std::sync::Arc;

use mnemo_kernel::host::{Kernel, TurnInput};
use mnemo_kernel::{ToolError, ToolScope};
use rmcp::model::Extensions;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, InitializeResult, ListPromptsResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use crate::auth::McpCaller;
use crate::sampling::SamplingLlm;

/// The header that names the chat an MCP client over HTTP acts in.
pub const CHAT_HEADER: &str = "x-mnemo-chat";

/// Who the tools act for.
#[derive(Debug, Clone)]
enum Caller {
    /// One user for the whole server run (stdio).
    Fixed {
        user: String,
        chat: Option<String>,
        session: String,
    },
    /// The API key of each HTTP request.
    FromKey,
}

/// Who a request acts for, where and in which session.
struct Acting {
    user: String,
    chat: Option<String>,
    session: String,
}

/// The MCP face of a running kernel.
#[derive(Clone)]
pub struct McpHandler {
    kernel: Kernel,
    caller: Caller,
    /// Where clients that offer sampling are registered, when the kernel's model is theirs.
    sampling: Option<Arc<SamplingLlm>>,
}

/// The prompt that hands a client the memory context for a query.
const CONTEXT_PROMPT: &str = "memory_context";
/// The resource that holds the memory context with no particular query.
const CONTEXT_RESOURCE: &str = "mnemo://memory/context";

impl McpHandler {
    /// A handler whose every call acts for `user` in `chat`, in one session per server run.
    /// With `sampling`, a client that offers sampling lends the kernel its model (see
    /// [`SamplingLlm`]).
    pub fn for_user(
        kernel: Kernel,
        user: String,
        chat: Option<String>,
        sampling: Option<Arc<SamplingLlm>>,
    ) -> Self {
        let session = format!("mcp-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%6f"));
        Self {
            kernel,
            caller: Caller::Fixed {
                user,
                chat,
                session,
            },
            sampling,
        }
    }

    /// A handler for HTTP, whose calls act for each request's API key.
    pub(crate) fn over_http(kernel: Kernel, sampling: Option<Arc<SamplingLlm>>) -> Self {
        Self {
            kernel,
            caller: Caller::FromKey,
            sampling,
        }
    }

    /// Who a message with these extensions (the HTTP request's, over HTTP) acts for.
    fn acting(&self, extensions: &Extensions) -> Result<Acting, ErrorData> {
        match &self.caller {
            Caller::Fixed {
                user,
                chat,
                session,
            } => Ok(Acting {
                user: user.clone(),
                chat: chat.clone(),
                session: session.clone(),
            }),
            Caller::FromKey => {
                let parts = extensions
                    .get::<axum::http::request::Parts>()
                    .ok_or_else(|| ErrorData::internal_error("no HTTP request to act for", None))?;
                let caller = parts
                    .extensions
                    .get::<McpCaller>()
                    .ok_or_else(|| ErrorData::invalid_request("no API key", None))?;
                let session = parts
                    .headers
                    .get("mcp-session-id")
                    .and_then(|value| value.to_str().ok())
                    .map_or_else(|| "mcp-http".to_owned(), |id| format!("mcp-{id}"));
                Ok(Acting {
                    user: caller.user.clone(),
                    chat: caller.chat.clone(),
                    session,
                })
            }
        }
    }

    /// The context blocks the kernel would put in the system prompt for `query`, for the
    /// caller's user and chat; a line saying so when memory holds nothing for it.
    async fn context_block(&self, acting: &Acting, query: &str) -> String {
        // Not the tools' session: memory leaves a session's own memories out of its context
        // (they are the conversation so far), but an MCP client's conversation is not stored
        // here, so what it saved through the tools in this run belongs in the context too.
        let input = TurnInput {
            user_id: acting.user.clone(),
            session_id: format!("{}-context", acting.session),
            chat_id: acting.chat.clone(),
            text: query.to_owned(),
        };
        let prepared = self.kernel.prepare_turn(&input, 0).await;
        let blocks: Vec<&str> = prepared
            .blocks
            .iter()
            .map(|(_, block)| block.trim_end())
            .filter(|block| !block.is_empty())
            .collect();
        if blocks.is_empty() {
            "Memory holds nothing about this yet.".to_owned()
        } else {
            blocks.join("\n\n")
        }
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_tools()
                .build(),
        )
        .with_server_info(Implementation::new("mnemo", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Long-term memory. Use the memory tools to remember what the user tells you \
                 and to search what you know before answering.",
        )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Some(sampling) = &self.sampling else {
            return;
        };
        match self.acting(&context.extensions) {
            Ok(acting) => sampling.register(&acting.user, context.peer),
            Err(error) => {
                tracing::warn!(%error, "an MCP client initialised with no user to act for")
            }
        }
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

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            CONTEXT_PROMPT,
            Some(
                "What memory holds that bears on a query (people, facts, reflections, the \
                 conversation so far), as the context block mnemo puts in its own system prompt.",
            ),
            Some(vec![PromptArgument::new("query")
                .with_description("what the conversation is about, e.g. the user's message")
                .with_required(true)]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let acting = self.acting(&context.extensions)?;
        if request.name != CONTEXT_PROMPT {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt `{}`; this server has `{CONTEXT_PROMPT}`",
                    request.name
                ),
                None,
            ));
        }
        let Some(query) = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("query"))
            .and_then(Value::as_str)
        else {
            return Err(ErrorData::invalid_params(
                format!("`{CONTEXT_PROMPT}` needs a `query` argument (a string)"),
                None,
            ));
        };
        let block = self.context_block(&acting, query).await;
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, block)])
                .with_description(format!("Memory context for {}", acting.user))
                .into(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut resource = Resource::new(CONTEXT_RESOURCE, "memory context").with_description(
            "What memory holds for this user and chat before any particular question: \
                 people, reflections and recent memories, as mnemo's system-prompt block.",
        );
        resource.mime_type = Some("text/markdown".to_owned());
        Ok(ListResourcesResult::with_all_items(vec![resource]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let acting = self.acting(&context.extensions)?;
        if request.uri != CONTEXT_RESOURCE {
            return Err(ErrorData::resource_not_found(
                format!(
                    "no resource `{}`; this server has `{CONTEXT_RESOURCE}`",
                    request.uri
                ),
                None,
            ));
        }
        let block = self.context_block(&acting, "").await;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(block, CONTEXT_RESOURCE).with_mime_type("text/markdown")
        ])
        .into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let acting = self.acting(&context.extensions)?;
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let scope = ToolScope {
            user_id: acting.user,
            session_id: Some(acting.session),
            chat_id: acting.chat,
            at: self.kernel.context().now(),
            caller: mnemo_kernel::ToolCaller::Client,
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
