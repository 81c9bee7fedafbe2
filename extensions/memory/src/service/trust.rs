//! Trust by source: whose words a memory written through a tool is, and the rule that a model's
//! words never override what someone stated until the user confirms them.
//!
//! The chat's own model writing a memory during a conversation (`ToolCaller::Model`) is checked
//! against what the user said in that conversation, by the consolidation's grounding check
//! ([`mnemo_memory_api::grounding::grounded`]): borne out, it is stored as told; not, it is kept
//! as the agent's claim or refused (`ungrounded_model_memories`); a fragment, not a statement,
//! is refused. A client (MCP, the CLI) and a service (the HTTP API) write what they were told.

use mnemo_kernel::{ToolCaller, ToolScope};
use mnemo_memory_api::grounding::{grounded, is_statement};

use super::MemoryService;
use crate::config::UngroundedModelMemories;
use crate::error::{MemoryError, Result};
use crate::types::{Origin, SessionKey};

/// What a tool writes: a statement about the user (`remember`, `store_memory`), which must be
/// one, or a keyed value (`set_context`'s "mood: tired"), which is short by nature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    Statement,
    KeyedValue,
}

/// How many of a conversation's latest turns a model's memory is checked against.
const GROUNDING_TURNS: usize = 40;

impl MemoryService {
    /// Whose words `content` is when `scope`'s caller writes it through a tool: a service's
    /// (HTTP API), told (a client), or, for the chat's model, told when the user's words in the
    /// conversation bear it out and the agent's claim otherwise.
    ///
    /// # Errors
    /// The chat's model wrote a fragment where a statement belongs, or what the user's words do
    /// not bear out with `ungrounded_model_memories = "refuse"` ([`MemoryError::Invalid`], which
    /// the model sees); or the store fails.
    pub(crate) async fn origin_for(
        &self,
        scope: &ToolScope,
        content: &str,
        written: Written,
    ) -> Result<Origin> {
        match &scope.caller {
            ToolCaller::Service => Ok(Origin::Service),
            ToolCaller::Client => Ok(Origin::Told),
            ToolCaller::Model { said } => {
                // A fragment ("my wife") is no memory, however grounded its words are: the
                // consolidation refuses the same (`is_statement`).
                if written == Written::Statement && !is_statement(content) {
                    tracing::info!("a memory the model wrote is refused: a fragment");
                    return Err(MemoryError::Invalid(
                        "this is a fragment, not a statement: write a whole sentence of what the \
                         user said, e.g. \"The user's wife is called Ana\""
                            .to_owned(),
                    ));
                }
                if self.said_by_user(scope, said, content).await? {
                    tracing::debug!("a memory the model wrote is grounded in the user's words");
                    return Ok(Origin::Told);
                }
                match self.config.ungrounded_model_memories {
                    UngroundedModelMemories::Keep => {
                        tracing::info!("a memory the model wrote is kept as the agent's claim");
                        Ok(Origin::Agent)
                    }
                    UngroundedModelMemories::Refuse => {
                        tracing::info!("a memory the model wrote is refused: not grounded");
                        Err(MemoryError::Invalid(
                            "the user did not say this in the conversation: store only what \
                             the user said, in their words"
                                .to_owned(),
                        ))
                    }
                }
            }
        }
    }

    /// Whether most of `content`'s words are in what the user said in `scope`'s conversation:
    /// `said` (the turn being answered) and the conversation's latest turns in the user's own
    /// words ([`Memory::is_users_own_words`](mnemo_memory_api::Memory::is_users_own_words)).
    async fn said_by_user(&self, scope: &ToolScope, said: &str, content: &str) -> Result<bool> {
        let Some(session_id) = scope.session_id.clone() else {
            return Ok(grounded(content, [said]));
        };
        let session = SessionKey {
            user_id: scope.user_id.clone(),
            chat_id: scope.chat_id.clone(),
            session_id,
        };
        let turns = self
            .store()?
            .recent_turns(&session, GROUNDING_TURNS)
            .await?;
        let words: Vec<&str> = turns
            .iter()
            .filter(|turn| turn.is_users_own_words())
            .map(|turn| turn.content.as_str())
            .chain([said])
            .collect();
        Ok(grounded(content, words))
    }

    /// Settles a contradiction the consolidation found between `new_id` and the older
    /// `old_id`: the old fact gives way (confidence 0.3, `supersedes`) when the new one's words
    /// may override it; a model's fact against what someone stated only records the
    /// contradiction (`contradicts`), and the stated fact stands until the user confirms the
    /// new one.
    ///
    /// # Errors
    /// Either fact is missing, or the store fails.
    pub(crate) async fn resolve_contradiction(&self, old_id: &str, new_id: &str) -> Result<()> {
        let store = self.store()?;
        let (Some(old), Some(new)) = (store.get(old_id).await?, store.get(new_id).await?) else {
            return Err(MemoryError::NotFound(format!(
                "resolve_conflict needs both `{old_id}` and `{new_id}`"
            )));
        };
        if new.origin.may_supersede(old.origin) {
            store.resolve_conflict(old_id, new_id).await
        } else {
            tracing::info!(
                new = %new_id,
                stated = %old_id,
                "an inferred fact contradicts a stated one; the stated one stands until the user confirms"
            );
            store.contest(old_id, new_id).await
        }
    }

    /// Confirms one of the owner's active facts: full confidence, it never fades, a model's
    /// fact becomes the user's word, and the stated facts it contradicted give way. Returns
    /// those.
    ///
    /// # Errors
    /// It is not an active fact of the owner, or the store fails.
    pub async fn confirm(&self, owner: &str, id: &str) -> Result<Vec<String>> {
        let superseded = self.store()?.confirm(id, Some(owner)).await?;
        if !superseded.is_empty() {
            tracing::info!(memory_id = %id, superseded = superseded.len(), "a confirmed fact supersedes what it contradicted");
        }
        Ok(superseded)
    }

    /// Confirms a fact for `scope`'s caller: the chat's model may confirm only what the user's
    /// words in the conversation bear out, since a confirmation makes a fact the user's word.
    ///
    /// # Errors
    /// The model confirms what the user did not say ([`MemoryError::Invalid`]); as
    /// [`Self::confirm`] otherwise.
    pub(crate) async fn confirm_for(&self, scope: &ToolScope, id: &str) -> Result<Vec<String>> {
        if let ToolCaller::Model { said } = &scope.caller {
            let fact = self.store()?.get(id).await?;
            let content = fact
                .filter(|fact| fact.user_id.as_deref() == Some(scope.user_id.as_str()))
                .map(|fact| fact.content)
                .unwrap_or_default();
            if !content.is_empty() && !self.said_by_user(scope, said, &content).await? {
                return Err(MemoryError::Invalid(
                    "only the user can confirm this: they did not say it in the conversation"
                        .to_owned(),
                ));
            }
        }
        self.confirm(&scope.user_id, id).await
    }
}
