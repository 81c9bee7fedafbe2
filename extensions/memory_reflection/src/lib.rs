//! The `memory_reflection` extension: a weekly reflection. It owns no data: the job reads each
//! user's recent facts and episodes from the `memory` extension's [`MemoryApi`], asks the LLM for
//! a short reflection, and saves it as a `reflection` memory tagged `weekly` (never decays, shown
//! in the context under "Weekly insight").

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, ChatRequest, ConfigError, Extension, ExtensionFactory, ExtensionSection, JobSpec,
    KernelContext, SchedulerProvider,
};
use mnemo_memory::{Memory, MemoryApi, MemoryKind};
use serde::{Deserialize, Serialize};

/// The config key, folder and extension name.
pub const NAME: &str = "memory_reflection";
/// The job's name.
pub const JOB_REFLECTION: &str = "execute_reflection";

const REFLECTION_PROMPT: &str = "You write a short weekly reflection for an assistant's long-term memory about one user. From the facts and conversation snippets of the past week, describe in 3 to 6 sentences: what mattered to the user, recurring themes, changes, open threads worth following up. Write plain prose in the third person, no lists, no preamble.";

/// `[extensions.memory_reflection]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryReflectionConfig {
    /// When the reflection runs (cron, UTC); Sundays at 03:00 by default.
    pub cron: String,
    /// Days of memories a reflection looks at.
    pub window_days: i64,
    /// Most memories read for one reflection.
    pub max_memories: usize,
    /// Fewest facts in the window for a reflection to be written.
    pub min_facts: usize,
    /// Fewest days between two reflections of one user.
    pub min_days_between: i64,
}

impl Default for MemoryReflectionConfig {
    fn default() -> Self {
        Self {
            cron: "0 3 * * 0".to_owned(),
            window_days: 7,
            max_memories: 200,
            min_facts: 3,
            min_days_between: 6,
        }
    }
}

/// The `memory_reflection` extension.
#[derive(Debug, Default)]
pub struct MemoryReflectionExtension {
    config: MemoryReflectionConfig,
}

impl MemoryReflectionExtension {
    /// The extension with `config`.
    pub fn new(config: MemoryReflectionConfig) -> Self {
        Self { config }
    }

    /// Writes the reflection of one user, or says why not.
    async fn reflect_user(
        &self,
        ctx: &KernelContext,
        memory: &dyn MemoryApi,
        user_id: Option<&str>,
        recent: &[Memory],
    ) -> Result<Option<String>, BoxError> {
        let who = user_id.unwrap_or("(no user)");
        if let Some(latest) = memory.get_latest_reflection(user_id).await? {
            if ctx.now() - latest.event_time < chrono::Duration::days(self.config.min_days_between)
            {
                tracing::info!(user = %who, "reflection skipped: the last one is less than {} days old", self.config.min_days_between);
                return Ok(None);
            }
        }
        let facts: Vec<&Memory> = recent
            .iter()
            .filter(|m| m.kind == MemoryKind::Fact)
            .collect();
        if facts.len() < self.config.min_facts {
            tracing::info!(user = %who, facts = facts.len(), "reflection skipped: too few facts this week");
            return Ok(None);
        }
        let Some(llm) = ctx.llm() else {
            return Ok(None);
        };
        let listing: String = recent
            .iter()
            .map(|m| {
                format!(
                    "- [{} {}] {}\n",
                    m.event_time.format("%Y-%m-%d"),
                    m.kind.as_str(),
                    m.content
                )
            })
            .collect();
        let response = llm
            .complete(ChatRequest::new(
                REFLECTION_PROMPT,
                format!(
                    "Memories of the past {} days:\n{listing}",
                    self.config.window_days
                ),
            ))
            .await?;
        let text = response.content.unwrap_or_default();
        let text = text.trim();
        if text.is_empty() {
            return Err("the model's reflection is empty".into());
        }
        let sources = recent.iter().map(|m| m.id.clone()).collect();
        let id = memory
            .save_reflection(user_id, text, sources, vec!["weekly".to_owned()])
            .await?;
        Ok(Some(id))
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "weekly reflection job",
        build: |section: &ExtensionSection| {
            let config: MemoryReflectionConfig = section.parse()?;
            if config.window_days < 1 || config.min_days_between < 0 {
                return Err(ConfigError::new(
                    section.file.clone(),
                    "[extensions.memory_reflection] keys `window_days` (at least 1) and `min_days_between` (at least 0)",
                ));
            }
            Ok(Arc::new(MemoryReflectionExtension::new(config)) as Arc<dyn Extension>)
        },
    }
}

#[async_trait]
impl Extension for MemoryReflectionExtension {
    fn name(&self) -> &str {
        NAME
    }

    async fn start(&self, ctx: &KernelContext) -> Result<(), BoxError> {
        if ctx.services().get::<dyn MemoryApi>().is_none() {
            return Err("the memory extension is not enabled".into());
        }
        Ok(())
    }

    fn scheduler_provider(&self) -> Option<&dyn SchedulerProvider> {
        Some(self)
    }
}

#[async_trait]
impl SchedulerProvider for MemoryReflectionExtension {
    fn jobs(&self) -> Vec<JobSpec> {
        vec![JobSpec {
            name: JOB_REFLECTION.to_owned(),
            cron: self.config.cron.clone(),
            description: "weekly reflection over each user's recent memories (LLM)".to_owned(),
        }]
    }

    async fn run_job(&self, ctx: &KernelContext, name: &str) -> Result<String, BoxError> {
        if name != JOB_REFLECTION {
            return Err(format!("unknown job `{name}`").into());
        }
        let memory = ctx
            .services()
            .get::<dyn MemoryApi>()
            .ok_or("the memory extension is not enabled")?;
        if ctx.llm().is_none() {
            tracing::info!("reflection skipped: no LLM is configured ([llm] in config.toml)");
            return Ok("skipped: no LLM is configured".to_owned());
        }
        let recent = memory
            .get_recent_memories_for_reflection(
                None,
                self.config.window_days,
                self.config.max_memories.saturating_mul(100),
            )
            .await?;
        let mut by_user: BTreeMap<Option<String>, Vec<Memory>> = BTreeMap::new();
        for item in recent {
            by_user.entry(item.user_id.clone()).or_default().push(item);
        }
        let (mut written, mut skipped) = (0, 0);
        for (user_id, mut memories) in by_user {
            memories.truncate(self.config.max_memories);
            match self
                .reflect_user(ctx, memory.as_ref(), user_id.as_deref(), &memories)
                .await?
            {
                Some(_) => written += 1,
                None => skipped += 1,
            }
        }
        Ok(format!(
            "{written} reflections written, {skipped} users skipped"
        ))
    }
}
