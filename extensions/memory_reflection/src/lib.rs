//! The `memory_reflection` extension: a weekly reflection. It owns no data: the job reads each
//! user's recent facts and episodes from the `memory` extension's [`MemoryApi`], asks the LLM for
//! a short reflection, and saves it as a `reflection` memory tagged `weekly` (never decays, shown
//! in the context under "Weekly insight").
//!
//! One reflection per scope a user has memories in: their personal memories, and each chat on
//! its own, saved in that chat. A reflection is seen where its memories could be seen, so a
//! chat's memories never reach another chat through it. A scope whose model call fails, or
//! whose reflection mostly repeats its input, is counted as failed and the others go on.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, ChatRequest, Extension, ExtensionFactory, ExtensionSection, JobReport, JobSpec,
    KernelContext, LlmError, SchedulerProvider, ValidateConfig,
};
use mnemo_memory_api::{Memory, MemoryApi, MemoryKind};
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

impl ValidateConfig for MemoryReflectionConfig {
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.window_days < 1 {
            problems.push("key `window_days`: must be at least 1".to_owned());
        }
        if self.min_days_between < 0 {
            problems.push("key `min_days_between`: must be at least 0".to_owned());
        }
        problems
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

    /// Writes the reflection of one user's memories in one scope (personal, or one chat), or
    /// says why not.
    async fn reflect_scope(
        &self,
        ctx: &KernelContext,
        memory: &dyn MemoryApi,
        (user_id, chat_id): (Option<&str>, Option<&str>),
        recent: &[Memory],
    ) -> Result<Option<String>, BoxError> {
        let who = scope_label(user_id, chat_id);
        if let Some(latest) = memory.get_latest_reflection(user_id, chat_id).await? {
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
        let heading = format!("Memories of the past {} days:", self.config.window_days);
        let request = ChatRequest {
            user: user_id.map(str::to_owned),
            ..ChatRequest::new(REFLECTION_PROMPT, format!("{heading}\n{listing}"))
        };
        let response = match llm.complete(request).await {
            Ok(response) => response,
            // No model for this user now: the reflection waits for a later run.
            Err(LlmError::Unavailable(reason)) => {
                tracing::info!(user = %who, %reason, "reflection skipped: no model available");
                return Ok(None);
            }
            Err(error) => return Err(error.into()),
        };
        let text = response.content.unwrap_or_default();
        let text = without_echoed_heading(&text, &heading);
        if text.is_empty() {
            return Err("the model's reflection is empty".into());
        }
        let copied = copied_share(text, &listing);
        if copied > MAX_COPIED_SHARE {
            return Err(format!(
                "the model's reflection repeats its input ({:.0}% of its word runs are copied); \
                 it was not saved",
                copied * 100.0
            )
            .into());
        }
        let sources = recent.iter().map(|m| m.id.clone()).collect();
        let id = memory
            .save_reflection(user_id, chat_id, text, sources, vec!["weekly".to_owned()])
            .await?;
        Ok(Some(id))
    }
}

/// "ana", or "ana in teamA": a scope as logs and the job's report name it.
fn scope_label(user_id: Option<&str>, chat_id: Option<&str>) -> String {
    let user = user_id.unwrap_or("(no user)");
    match chat_id {
        Some(chat) => format!("{user} in {chat}"),
        None => user.to_owned(),
    }
}

/// A reflection whose four-word runs come from its input more than this is a copy, not a
/// reflection (a small model's echo of the listing was stored as the week's insight).
const MAX_COPIED_SHARE: f64 = 0.5;

/// Lower-case words of `text`.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// `text` trimmed, without the input's `heading` where a model echoed it at the start (a
/// small model's reflection began "Memories of the past 7 days:"), alone on its line or before
/// the summary, in any case and with markdown marks around it.
fn without_echoed_heading<'t>(text: &'t str, heading: &str) -> &'t str {
    let heading = heading.trim_end_matches(':');
    let emphasis = |c: char| matches!(c, '*' | '_' | ' ' | '\t');
    let mut rest = text.trim();
    loop {
        let line = rest.trim_start_matches(|c: char| emphasis(c) || c == '#');
        if !line
            .get(..heading.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(heading))
        {
            return rest;
        }
        let tail = line[heading.len()..].trim_start_matches(emphasis);
        rest = match tail.strip_prefix(':') {
            Some(after) => after.trim_start_matches(emphasis).trim(),
            None if tail.is_empty() || tail.starts_with(['\n', '\r']) => tail.trim(),
            // "Memories of the past 7 days show…" is a sentence, not the heading.
            None => return rest,
        };
    }
}

/// The share of `text`'s four-word runs that also occur in `input`.
fn copied_share(text: &str, input: &str) -> f64 {
    let source: HashSet<Vec<String>> = words(input).windows(4).map(<[String]>::to_vec).collect();
    let runs: Vec<Vec<String>> = words(text).windows(4).map(<[String]>::to_vec).collect();
    if runs.is_empty() {
        return 0.0;
    }
    runs.iter().filter(|run| source.contains(*run)).count() as f64 / runs.len() as f64
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "weekly reflection job",
        build: |section: &ExtensionSection| {
            let config: MemoryReflectionConfig = section.parse_checked()?;
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

    async fn run_job(&self, ctx: &KernelContext, name: &str) -> Result<JobReport, BoxError> {
        if name != JOB_REFLECTION {
            return Err(format!("unknown job `{name}`").into());
        }
        let memory = ctx
            .services()
            .get::<dyn MemoryApi>()
            .ok_or("the memory extension is not enabled")?;
        if ctx.llm().is_none() {
            tracing::info!("reflection skipped: no LLM is configured ([llm] in config.toml)");
            return Ok(JobReport::new("skipped: no LLM is configured"));
        }
        let recent = memory
            .get_recent_memories_for_reflection(
                None,
                self.config.window_days,
                self.config.max_memories.saturating_mul(100),
            )
            .await?;
        let mut by_scope: BTreeMap<(Option<String>, Option<String>), Vec<Memory>> = BTreeMap::new();
        for item in recent {
            by_scope
                .entry((item.user_id.clone(), item.chat_id.clone()))
                .or_default()
                .push(item);
        }
        let (mut written, mut skipped, mut failed) = (0, 0, 0u64);
        let mut first_failure = None;
        for ((user_id, chat_id), mut memories) in by_scope {
            memories.truncate(self.config.max_memories);
            let scope = (user_id.as_deref(), chat_id.as_deref());
            match self
                .reflect_scope(ctx, memory.as_ref(), scope, &memories)
                .await
            {
                Ok(Some(_)) => written += 1,
                Ok(None) => skipped += 1,
                Err(error) => {
                    let who = scope_label(scope.0, scope.1);
                    tracing::warn!(user = %who, %error, "reflection failed; the other users go on");
                    failed += 1;
                    first_failure.get_or_insert(format!("{who}: {error}"));
                }
            }
        }
        let why = first_failure.map_or(String::new(), |first| format!(" (first: {first})"));
        let summary =
            format!("{written} reflections written, {skipped} skipped, {failed} failed{why}");
        if failed > 0 && written == 0 {
            return Err(summary.into());
        }
        Ok(JobReport::new(summary).with_failed(failed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_kernel::{ExtensionSection, ValidateConfig};

    #[test]
    fn an_echoed_heading_is_dropped_and_the_summary_kept() {
        let heading = "Memories of the past 7 days:";
        let summary = "This week Ana trained for the half marathon.";
        for reply in [
            format!("Memories of the past 7 days:\n{summary}"),
            format!("## Memories of the past 7 days\n\n{summary}\n"),
            format!("**memories of the past 7 days:** {summary}"),
            format!("Memories of the past 7 days:\nMemories of the past 7 days:\n{summary}"),
            format!("  {summary}  "),
        ] {
            assert_eq!(
                without_echoed_heading(&reply, heading),
                summary,
                "{reply:?}"
            );
        }
        let sentence = "Memories of the past 7 days show a busy week.";
        assert_eq!(without_echoed_heading(sentence, heading), sentence);
        assert_eq!(
            without_echoed_heading("Memories of the past 7 days:", heading),
            ""
        );
    }

    #[test]
    fn a_reflection_that_repeats_its_listing_is_a_copy_and_an_insight_is_not() {
        let listing = "- [2026-04-06 fact] The user's sister Dana moved to Lisbon\n\
                       - [2026-04-07 fact] The user loves hiking in the Alps every August\n";
        let echo = "The user's sister Dana moved to Lisbon. The user loves hiking in the Alps.";
        assert!(
            copied_share(echo, listing) > MAX_COPIED_SHARE,
            "{}",
            copied_share(echo, listing)
        );
        let insight = "Family and the outdoors keep coming up: Ana plans her summers around \
                       mountains, and her sister's move abroad is on her mind.";
        assert_eq!(copied_share(insight, listing), 0.0);
        // Too short for a four-word run: nothing to compare, not a copy.
        assert_eq!(copied_share("Dana, Lisbon.", listing), 0.0);
        // Case and punctuation do not hide a copy.
        assert_eq!(
            copied_share("THE USER LOVES HIKING!", "the user, loves hiking"),
            1.0
        );
    }

    #[test]
    fn scopes_are_named_as_the_report_says_them() {
        assert_eq!(scope_label(Some("ana"), None), "ana");
        assert_eq!(scope_label(Some("ana"), Some("teamA")), "ana in teamA");
        assert_eq!(scope_label(None, None), "(no user)");
    }

    #[test]
    fn the_config_check_names_each_bad_key() {
        let config = MemoryReflectionConfig {
            window_days: 0,
            min_days_between: -1,
            ..MemoryReflectionConfig::default()
        };
        let problems = config.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("`window_days`"), "{problems:?}");
        assert!(problems[1].contains("`min_days_between`"), "{problems:?}");
        assert!(MemoryReflectionConfig::default().problems().is_empty());
        let mut table = toml::Table::new();
        table.insert("window_days".into(), toml::Value::Integer(0));
        let section = ExtensionSection::new(NAME, table);
        let error = section
            .parse_checked::<MemoryReflectionConfig>()
            .unwrap_err()
            .to_string();
        assert!(error.contains("window_days"), "{error}");
    }
}
