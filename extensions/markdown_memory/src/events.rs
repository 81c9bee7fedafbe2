//! The consolidation triggers: `/new` and the message window, fed by `user_message` and
//! `agent_response`.
//!
//! Every message of a session is appended to its buffer file before anything else, so nothing is
//! lost on restart. Events reach this handler one at a time, in publish order, so a `/new` is fully
//! consolidated before the next message of the session is buffered.

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, Event, EventHandler, KernelContext, TypedEvent, TOPIC_AGENT_RESPONSE,
    TOPIC_USER_MESSAGE,
};

use crate::consolidate::Outcome;
use crate::erasure::{Forgotten, Needle, UserErased};
use crate::error::{MarkdownError, Result};
use crate::session::{self, BufferedMessage, Role, SessionKey};
use crate::workspace::Workspace;
use crate::MarkdownMemoryExtension;

/// The text after a leading `/new` command, if `text` is one (`/new` alone gives `""`).
fn new_command(text: &str) -> Option<&str> {
    let rest = text.trim().strip_prefix("/new")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

impl MarkdownMemoryExtension {
    /// `/new`: consolidates everything buffered for the session, then forgets the session.
    async fn reset_session(
        &self,
        ctx: &KernelContext,
        workspace: &Workspace,
        session: &SessionKey,
    ) -> Result<()> {
        let key = session.clone();
        let messages =
            crate::blocking(workspace, move |workspace| workspace.session_messages(&key)).await?;
        if messages.is_empty() {
            tracing::debug!(%session, "/new with nothing buffered");
        } else {
            self.consolidator
                .run(ctx, workspace, session, &messages)
                .await?;
        }
        let key = session.clone();
        crate::blocking(workspace, move |workspace| workspace.session_reset(&key)).await?;
        tracing::info!(%session, messages = messages.len(), "session consolidated and reset by /new");
        Ok(())
    }

    /// The window trigger: consolidates all but the latest `keep_messages`, keeps those in the
    /// buffer and records a recap of them for the next turns' context.
    async fn consolidate_window(
        &self,
        ctx: &KernelContext,
        workspace: &Workspace,
        session: &SessionKey,
        messages: Vec<BufferedMessage>,
    ) -> Result<()> {
        let cut = messages
            .len()
            .saturating_sub(self.files.config.keep_messages);
        let (older, kept) = messages.split_at(cut);
        let outcome = self
            .consolidator
            .run(ctx, workspace, session, older)
            .await?;
        let summary = match outcome {
            Outcome::Consolidated { history_entry, .. } => history_entry,
            Outcome::Fallback { .. } => None,
        };
        let recap = session::recap(summary.as_deref(), kept);
        let kept = kept.to_vec();
        let key = session.clone();
        crate::blocking(workspace, move |workspace| {
            workspace.session_replace(&key, &kept)?;
            workspace.write_session_recap(&key, &recap)
        })
        .await?;
        tracing::info!(%session, consolidated = older.len(), kept = self.files.config.keep_messages, "session window consolidated");
        Ok(())
    }
}

impl MarkdownMemoryExtension {
    /// `memory.forgotten`: removes the forgotten text's copies from the owner's files.
    async fn forget_copies(&self, forgotten: Forgotten) -> Result<()> {
        let Some(needle) = Needle::new(&forgotten.content) else {
            return Ok(());
        };
        let base = self
            .files
            .workspace
            .get()
            .ok_or(MarkdownError::NotStarted)?;
        let workspace = match forgotten.user_id.as_deref() {
            Some(user) if self.files.config.per_user => match base.existing_user(user) {
                Some(workspace) => workspace,
                None => return Ok(()),
            },
            _ => base.clone(),
        };
        let session = forgotten.session_id.as_deref().map(|session_id| {
            SessionKey::new(
                forgotten.user_id.as_deref(),
                forgotten.chat_id.as_deref(),
                session_id,
            )
        });
        let changed = crate::blocking(&workspace, move |workspace| {
            workspace.scrub(session.as_ref(), &needle)
        })
        .await?;
        if !changed.is_empty() {
            tracing::info!(files = ?changed, "removed a forgotten memory's copies from the markdown files");
        }
        Ok(())
    }

    /// `memory.user_erased`: removes the user's workspace, and the buffers of their sessions in
    /// the shared workspace (all of them, whatever the chat or session).
    async fn erase_user(&self, erased: UserErased) -> Result<()> {
        let base = self
            .files
            .workspace
            .get()
            .ok_or(MarkdownError::NotStarted)?;
        let user = erased.user_id.clone();
        let (workspace, sessions) = crate::blocking(base, move |workspace| {
            Ok((
                workspace.remove_user(&user)?,
                workspace.remove_user_sessions(&user)?,
            ))
        })
        .await?;
        if self.files.config.per_user {
            tracing::info!(user_id = %erased.user_id, workspace, sessions, "user's markdown files erased");
            return Ok(());
        }
        tracing::warn!(
            user_id = %erased.user_id,
            sessions,
            "user erased from a shared markdown workspace: their session buffers are gone, but \
             MEMORY.md and the history files are shared and may still mention them; \
             set per_user = true to keep each user's files apart"
        );
        Ok(())
    }
}

#[async_trait]
impl EventHandler for MarkdownMemoryExtension {
    fn topics(&self) -> Vec<String> {
        vec![
            TOPIC_USER_MESSAGE.to_owned(),
            TOPIC_AGENT_RESPONSE.to_owned(),
            Forgotten::TOPIC.to_owned(),
            UserErased::TOPIC.to_owned(),
        ]
    }

    async fn handle(&self, ctx: &KernelContext, event: &Event) -> Result<(), BoxError> {
        let role = match event.topic() {
            TOPIC_USER_MESSAGE => Role::User,
            TOPIC_AGENT_RESPONSE => Role::Assistant,
            Forgotten::TOPIC => {
                if let Some(forgotten) = event.decode::<Forgotten>().transpose()? {
                    self.forget_copies(forgotten).await?;
                }
                return Ok(());
            }
            UserErased::TOPIC => {
                if let Some(erased) = event.decode::<UserErased>().transpose()? {
                    self.erase_user(erased).await?;
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        let (Some(session_id), Some(mut text)) =
            (event.session_id.as_deref(), event.payload.text())
        else {
            tracing::debug!(event_id = %event.id, "conversation event without a session; not buffered");
            return Ok(());
        };
        let workspace = self.files.open_workspace(event.user_id.as_deref())?;
        let workspace = &workspace;
        let session = SessionKey::new(
            event.user_id.as_deref(),
            event.chat_id.as_deref(),
            session_id,
        );
        if role == Role::User {
            if let Some(rest) = new_command(text) {
                self.reset_session(ctx, workspace, &session).await?;
                if rest.is_empty() {
                    return Ok(());
                }
                text = rest;
            }
        }
        let message = BufferedMessage {
            role,
            at: event.at,
            text: text.to_owned(),
        };
        let key = session.clone();
        let messages = crate::blocking(workspace, move |workspace| {
            workspace.session_append(&key, &message)?;
            workspace.session_messages(&key)
        })
        .await?;
        if messages.len() > self.files.config.memory_window {
            self.consolidate_window(ctx, workspace, &session, messages)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::new_command;

    #[test]
    fn the_new_command_is_a_whole_word() {
        assert_eq!(new_command("/new"), Some(""));
        assert_eq!(new_command("  /new \n"), Some(""));
        assert_eq!(
            new_command("/new let's plan the trip"),
            Some("let's plan the trip")
        );
        assert_eq!(new_command("/newer"), None);
        assert_eq!(new_command("start a /new session"), None);
    }
}
