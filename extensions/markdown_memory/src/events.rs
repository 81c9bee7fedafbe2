//! The consolidation triggers: `/new` and the message window, fed by `user_message` and
//! `agent_response`.
//!
//! Every message of a session is appended to its buffer file before anything else, so nothing is
//! lost on restart. Events reach this handler one at a time, in publish order, so a `/new` is fully
//! consolidated before the next message of the session is buffered.

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, Event, EventHandler, KernelContext, TOPIC_AGENT_RESPONSE, TOPIC_USER_MESSAGE,
};

use crate::consolidate::Outcome;
use crate::error::Result;
use crate::session::{self, BufferedMessage, Role};
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
        session_id: &str,
    ) -> Result<()> {
        let id = session_id.to_owned();
        let messages =
            crate::blocking(workspace, move |workspace| workspace.session_messages(&id)).await?;
        if messages.is_empty() {
            tracing::debug!(%session_id, "/new with nothing buffered");
        } else {
            self.consolidator
                .run(ctx, workspace, session_id, &messages)
                .await?;
        }
        let id = session_id.to_owned();
        crate::blocking(workspace, move |workspace| workspace.session_reset(&id)).await?;
        tracing::info!(%session_id, messages = messages.len(), "session consolidated and reset by /new");
        Ok(())
    }

    /// The window trigger: consolidates all but the latest `keep_messages`, keeps those in the
    /// buffer and records a recap of them for the next turns' context.
    async fn consolidate_window(
        &self,
        ctx: &KernelContext,
        workspace: &Workspace,
        session_id: &str,
        messages: Vec<BufferedMessage>,
    ) -> Result<()> {
        let cut = messages.len().saturating_sub(self.config.keep_messages);
        let (older, kept) = messages.split_at(cut);
        let outcome = self
            .consolidator
            .run(ctx, workspace, session_id, older)
            .await?;
        let summary = match outcome {
            Outcome::Consolidated { history_entry, .. } => history_entry,
            Outcome::Fallback { .. } => None,
        };
        let recap = session::recap(summary.as_deref(), kept);
        let kept = kept.to_vec();
        let id = session_id.to_owned();
        crate::blocking(workspace, move |workspace| {
            workspace.session_replace(&id, &kept)?;
            workspace.write_session_recap(&id, &recap)
        })
        .await?;
        tracing::info!(%session_id, consolidated = older.len(), kept = self.config.keep_messages, "session window consolidated");
        Ok(())
    }
}

#[async_trait]
impl EventHandler for MarkdownMemoryExtension {
    fn topics(&self) -> Vec<String> {
        vec![
            TOPIC_USER_MESSAGE.to_owned(),
            TOPIC_AGENT_RESPONSE.to_owned(),
        ]
    }

    async fn handle(&self, ctx: &KernelContext, event: &Event) -> Result<(), BoxError> {
        let role = match event.topic() {
            TOPIC_USER_MESSAGE => Role::User,
            TOPIC_AGENT_RESPONSE => Role::Assistant,
            _ => return Ok(()),
        };
        let (Some(session_id), Some(mut text)) =
            (event.session_id.as_deref(), event.payload.text())
        else {
            tracing::debug!(event_id = %event.id, "conversation event without a session; not buffered");
            return Ok(());
        };
        let workspace = self.open_workspace(event.user_id.as_deref())?;
        let workspace = &workspace;
        if role == Role::User {
            if let Some(rest) = new_command(text) {
                self.reset_session(ctx, workspace, session_id).await?;
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
        let id = session_id.to_owned();
        let messages = crate::blocking(workspace, move |workspace| {
            workspace.session_append(&id, &message)?;
            workspace.session_messages(&id)
        })
        .await?;
        if messages.len() > self.config.memory_window {
            self.consolidate_window(ctx, workspace, session_id, messages)
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
