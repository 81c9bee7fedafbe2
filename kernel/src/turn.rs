//! The agent-turn pipeline: context in, model with tools, reply out.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::KernelError;
use crate::event::{Event, EventPayload};
use crate::extension::{ContextRequest, ToolError, ToolScope, ToolSpec};
use crate::kernel::Kernel;
use crate::llm::model_text::{decode_entities, imitates_tool_call};
use crate::llm::{ChatMessage, ChatRequest, LlmToolCall};

/// The message that ends the user's session and starts a new one (seeds 002 and 003). It is
/// published like any message, so that extensions act on it (markdown memory consolidates the
/// session, the memory store closes it), and is never sent to the model.
pub const NEW_SESSION_COMMAND: &str = "/new";

/// The agent's answer to [`NEW_SESSION_COMMAND`], once every extension has handled it (seed
/// 002: "reply \"Session cleared.\"").
pub const SESSION_CLEARED: &str = "Session cleared.";

/// A user's message to the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnInput {
    /// The user.
    pub user_id: String,
    /// The session.
    pub session_id: String,
    /// The chat, if any.
    pub chat_id: Option<String>,
    /// What the user said.
    pub text: String,
}

impl TurnInput {
    fn scope(&self, kernel: &Kernel) -> ToolScope {
        ToolScope {
            user_id: self.user_id.clone(),
            session_id: Some(self.session_id.clone()),
            chat_id: self.chat_id.clone(),
            at: kernel.context().now(),
            caller: crate::ToolCaller::Model {
                said: self.text.clone(),
            },
        }
    }
}

/// Everything the model gets before it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedTurn {
    /// The base prompt followed by every context block.
    pub system_prompt: String,
    /// The context blocks as (extension, block).
    pub blocks: Vec<(String, String)>,
    /// Every tool the model may call.
    pub tools: Vec<ToolSpec>,
}

/// What an agent turn did.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The agent's final reply.
    pub reply: String,
    /// Each tool call and its result, in order.
    pub tool_calls: Vec<(LlmToolCall, Result<Value, ToolError>)>,
    /// Model round trips.
    pub rounds: usize,
}

impl Kernel {
    /// Gathers every context provider's block into the system prompt and collects every tool.
    /// `history_messages` says how many of the session's latest messages go to the model as
    /// chat history beside it.
    pub async fn prepare_turn(&self, input: &TurnInput, history_messages: usize) -> PreparedTurn {
        self.prepare_turn_as_of(input, history_messages, None).await
    }

    /// [`Self::prepare_turn`] as of a past time: the context of what the user believed then
    /// ([`ContextRequest::as_of`]).
    pub async fn prepare_turn_as_of(
        &self,
        input: &TurnInput,
        history_messages: usize,
        as_of: Option<DateTime<Utc>>,
    ) -> PreparedTurn {
        let request = ContextRequest {
            prompt: input.text.clone(),
            user_id: input.user_id.clone(),
            session_id: input.session_id.clone(),
            chat_id: input.chat_id.clone(),
            at: self.context().now(),
            history_messages,
            as_of,
        };
        let blocks = self.gather_context(&request).await;
        let mut system_prompt = self.config().kernel.system_prompt.clone();
        for (_, block) in &blocks {
            system_prompt.push_str("\n\n");
            system_prompt.push_str(block.trim_end());
        }
        PreparedTurn {
            system_prompt,
            blocks,
            tools: self.tools(),
        }
    }

    /// Runs one tool call the model made. Arguments that came as a string the client could not
    /// read as JSON are refused by saying so, rather than as "expected object, found string".
    async fn run_tool_call(
        &self,
        input: &TurnInput,
        call: &LlmToolCall,
    ) -> Result<Value, ToolError> {
        let arguments = match &call.arguments {
            // A chat format may have written the JSON's quotes as HTML entities.
            Value::String(raw) => match serde_json::from_str::<Value>(&decode_entities(raw)) {
                Ok(arguments) => arguments,
                Err(error) => {
                    return Err(ToolError::invalid(
                        &call.name,
                        format!("the arguments are not valid JSON ({error})"),
                    ))
                }
            },
            other => other.clone(),
        };
        self.call_tool(&input.scope(self), &call.name, arguments)
            .await
    }

    /// Runs one agent turn on the configured model.
    ///
    /// Publishes the `user_message`, prepares the prompt, lets the model call tools (dispatched by
    /// name, at most `[kernel] max_tool_rounds` round trips), then publishes the `agent_response`.
    /// `history` holds earlier messages of the session, oldest first, without a system message.
    /// [`NEW_SESSION_COMMAND`] alone is published and waited for (every extension has handled
    /// it, a consolidation included) and answered [`SESSION_CLEARED`], without the model; the
    /// caller starts a new session id.
    ///
    /// # Errors
    /// [`KernelError::NoLlm`] without a model; [`KernelError::Llm`] if the model fails; nothing of
    /// the reply is published then. A failure after tool calls ran is
    /// [`KernelError::TurnFailedAfterTools`], which holds those calls and their results.
    pub async fn run_turn(
        &self,
        input: &TurnInput,
        history: &[ChatMessage],
    ) -> Result<TurnOutcome, KernelError> {
        let user_message = Event::new(
            self.context().now(),
            EventPayload::UserMessage {
                text: input.text.clone(),
            },
        )
        .with_scope(
            Some(input.session_id.clone()),
            Some(input.user_id.clone()),
            input.chat_id.clone(),
        );
        if input.text.trim() == NEW_SESSION_COMMAND {
            self.publish(user_message).await?;
            self.settle().await;
            return Ok(TurnOutcome {
                reply: SESSION_CLEARED.to_owned(),
                tool_calls: Vec::new(),
                rounds: 0,
            });
        }
        let llm = self.context().llm().ok_or(KernelError::NoLlm)?;
        let user_event = self.publish(user_message).await?;
        let prepared = self.prepare_turn(input, history.len()).await;
        let mut messages = Vec::with_capacity(history.len() + 2);
        messages.push(ChatMessage::system(prepared.system_prompt));
        messages.extend(history.iter().cloned());
        messages.push(ChatMessage::user(input.text.clone()));

        let max_rounds = self.config().kernel.max_tool_rounds;
        let mut tool_calls = Vec::new();
        let mut done: std::collections::HashMap<String, Result<Value, ToolError>> =
            std::collections::HashMap::new();
        let mut rounds = 0;
        let reply = loop {
            rounds += 1;
            let offer_tools = rounds <= max_rounds;
            let response = match llm
                .complete(ChatRequest {
                    messages: messages.clone(),
                    tools: if offer_tools {
                        prepared.tools.clone()
                    } else {
                        Vec::new()
                    },
                    ..ChatRequest::default()
                })
                .await
            {
                Ok(response) => response,
                Err(error) => return Err(after_tools(error.into(), tool_calls)),
            };
            if response.tool_calls.is_empty() || !offer_tools {
                break decode_entities(&response.content.unwrap_or_default()).into_owned();
            }
            let mut assistant = ChatMessage::assistant(response.content.unwrap_or_default());
            assistant.tool_calls = response.tool_calls.clone();
            messages.push(assistant);
            for call in response.tool_calls {
                // A small model repeats one call many times in a turn (8 identical
                // `remember_fact` calls were seen): each distinct call runs once, and a repeat
                // gets the first one's result.
                let key = format!("{}\u{0}{}", call.name, call_arguments(&call.arguments));
                let result = match done.get(&key) {
                    Some(first) => Clone::clone(first),
                    None => {
                        let result = self.run_tool_call(input, &call).await;
                        done.insert(key, result.clone());
                        result
                    }
                };
                let shown = match &result {
                    Ok(value) => value.to_string(),
                    Err(error) => format!("error: {error}"),
                };
                messages.push(ChatMessage::tool(call.id.clone(), shown));
                tool_calls.push((call, result));
            }
        };
        // An empty reply, or one that only imitates a tool call, is no answer: asked once more
        // without tools, else the user is told, and nothing is stored as the agent's answer.
        let reply = match Unanswered::of(&reply) {
            None => Ok(reply),
            Some(flaw) => {
                tracing::info!(
                    flaw = flaw.as_str(),
                    "the model gave no answer; asking once more without tools"
                );
                rounds += 1;
                let mut retry = messages.clone();
                retry.push(ChatMessage::system(PLAIN_REPLY_PROMPT.to_owned()));
                match llm
                    .complete(ChatRequest {
                        messages: retry,
                        ..ChatRequest::default()
                    })
                    .await
                {
                    Ok(response) => {
                        let again =
                            decode_entities(&response.content.unwrap_or_default()).into_owned();
                        // The user is told what the last reply did.
                        Unanswered::of(&again).map_or(Ok(again), Err)
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the retry without tools failed");
                        Err(flaw)
                    }
                }
            }
        };
        let reply = match reply {
            Ok(reply) => reply,
            Err(flaw) => {
                tracing::info!(
                    flaw = flaw.as_str(),
                    "the model gave no answer twice; the user is told and nothing is stored"
                );
                return Ok(TurnOutcome {
                    reply: flaw.message().to_owned(),
                    tool_calls,
                    rounds,
                });
            }
        };
        let published = self
            .publish(
                Event::new(
                    self.context().now(),
                    EventPayload::AgentResponse {
                        text: reply.clone(),
                    },
                )
                .with_scope(
                    Some(input.session_id.clone()),
                    Some(input.user_id.clone()),
                    input.chat_id.clone(),
                )
                .with_parent(user_event.id),
            )
            .await;
        if let Err(error) = published {
            return Err(after_tools(error, tool_calls));
        }
        Ok(TurnOutcome {
            reply,
            tool_calls,
            rounds,
        })
    }
}

/// What the retry of a reply that was empty or imitated a tool call is told.
const PLAIN_REPLY_PROMPT: &str =
    "Answer the user now in plain words. Tools are not available: do not write a tool call.";

/// What the user is told when the model's reply imitated a tool call twice: no answer is shown
/// or stored.
pub const NO_ANSWER: &str =
    "Sorry, the model replied with a tool call instead of an answer, twice. Please ask again.";

/// What the user is told when the model's reply was empty twice: nothing is stored.
pub const EMPTY_ANSWER: &str = "Sorry, the model gave an empty reply, twice. Please ask again.";

/// Why a model's final reply is no answer to show or store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unanswered {
    /// Nothing but white space (a small model's reply after a tool call, often).
    Empty,
    /// Only an imitation of a tool call ([`imitates_tool_call`]).
    ImitatedToolCall,
}

impl Unanswered {
    /// Why `reply` is no answer, or `None` when it is one.
    fn of(reply: &str) -> Option<Self> {
        if reply.trim().is_empty() {
            Some(Self::Empty)
        } else if imitates_tool_call(reply) {
            Some(Self::ImitatedToolCall)
        } else {
            None
        }
    }

    /// Its name in logs.
    fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::ImitatedToolCall => "imitated_tool_call",
        }
    }

    /// What the user is told when the retry is no answer either.
    fn message(self) -> &'static str {
        match self {
            Self::Empty => EMPTY_ANSWER,
            Self::ImitatedToolCall => NO_ANSWER,
        }
    }
}

/// A tool call's arguments as one text, the same for the same arguments however the model wrote
/// them (an object, or JSON in a string, with or without HTML entities).
fn call_arguments(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => serde_json::from_str::<Value>(&decode_entities(raw))
            .map_or_else(|_| raw.clone(), |value| value.to_string()),
        other => other.to_string(),
    }
}

/// `error`, carrying the tool calls that ran before it, if any did.
fn after_tools(
    error: KernelError,
    tool_calls: Vec<(LlmToolCall, Result<Value, ToolError>)>,
) -> KernelError {
    if tool_calls.is_empty() {
        error
    } else {
        KernelError::TurnFailedAfterTools {
            tool_calls,
            source: Box::new(error),
        }
    }
}
