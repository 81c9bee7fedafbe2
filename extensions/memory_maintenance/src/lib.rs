//! The `memory_maintenance` extension: scheduled upkeep of the memory store. It owns no data and
//! drives the `memory` extension through its published [`MemoryApi`].
//!
//! Jobs (cron expressions from config, UTC): `execute_entity_enrichment` (02:00) re-extracts
//! entities with the accurate NER strategy for memories with few entities; `execute_consolidation`
//! (03:00) announces every pending session as `memory.session_completed` and consolidates it
//! into facts with the LLM, as the consolidator does for each such event the memory extension
//! publishes when a user starts a new session; `execute_decay` (04:00) applies Ebbinghaus
//! decay, which fades facts nobody recalls out of the context (or, with `decay_action =
//! "soft_delete"`, soft-deletes them as the reference design does).

mod consolidate;

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, Event, EventHandler, Extension, ExtensionFactory, ExtensionSection, JobReport,
    JobSpec, KernelContext, SchedulerProvider, TypedEvent, ValidateConfig,
};
use mnemo_memory_api::{DecayAction, MemoryApi, MemoryKind, SessionCompleted, SessionKey};

use consolidate::{InFlight, Outcome, Settings};
use serde::{Deserialize, Serialize};

/// The config key, folder and extension name.
pub const NAME: &str = "memory_maintenance";

/// Job names.
pub const JOB_ENRICHMENT: &str = "execute_entity_enrichment";
/// Job names.
pub const JOB_CONSOLIDATION: &str = "execute_consolidation";
/// Job names.
pub const JOB_DECAY: &str = "execute_decay";

/// `[extensions.memory_maintenance]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryMaintenanceConfig {
    /// When entity enrichment runs (cron, UTC).
    pub enrichment_cron: String,
    /// When every pending session is consolidated (cron, UTC).
    pub consolidation_cron: String,
    /// When decay runs (cron, UTC).
    pub decay_cron: String,
    /// Failed consolidations of one session before it is no longer retried (it stays pending).
    pub max_consolidation_attempts: i64,
    /// Similar older facts checked for contradiction with each new fact.
    pub conflict_candidates: usize,
    /// Facts whose confidence decays below this are taken out by `decay_action`.
    pub decay_threshold: f64,
    /// What decay does with a fact below `decay_threshold`: `archive` (it fades out of the
    /// context and stays searchable) or `soft_delete` (the reference design's: never
    /// retrieved again).
    pub decay_action: DecayAction,
    /// Memories with at most this many entity links are re-extracted.
    pub enrichment_max_entities: usize,
    /// Failed enrichments of one memory before it is no longer retried (`mnemo jobs retry`
    /// gives it, and sessions that gave up, a fresh start).
    pub max_enrichment_attempts: i64,
    /// Memories enriched per run.
    pub enrichment_batch: usize,
}

impl Default for MemoryMaintenanceConfig {
    fn default() -> Self {
        Self {
            enrichment_cron: "0 2 * * *".to_owned(),
            consolidation_cron: "0 3 * * *".to_owned(),
            decay_cron: "0 4 * * *".to_owned(),
            max_consolidation_attempts: 5,
            conflict_candidates: 5,
            decay_threshold: 0.05,
            decay_action: DecayAction::Archive,
            enrichment_max_entities: 2,
            max_enrichment_attempts: 3,
            enrichment_batch: 50,
        }
    }
}

impl ValidateConfig for MemoryMaintenanceConfig {
    fn problems(&self) -> Vec<String> {
        if (0.0..1.0).contains(&self.decay_threshold) {
            return Vec::new();
        }
        vec!["key `decay_threshold`: must be at least 0 and below 1".to_owned()]
    }
}

/// The `memory_maintenance` extension.
#[derive(Debug, Default)]
pub struct MemoryMaintenanceExtension {
    config: MemoryMaintenanceConfig,
    in_flight: InFlight,
}

impl MemoryMaintenanceExtension {
    /// The extension with `config`.
    pub fn new(config: MemoryMaintenanceConfig) -> Self {
        Self {
            config,
            in_flight: InFlight::default(),
        }
    }

    fn settings(&self) -> Settings {
        Settings {
            max_attempts: self.config.max_consolidation_attempts,
            conflict_candidates: self.config.conflict_candidates,
        }
    }

    /// Consolidates one session and logs what happened.
    async fn consolidate_one(
        &self,
        ctx: &KernelContext,
        memory: &dyn MemoryApi,
        session: &SessionKey,
    ) -> Result<Outcome, BoxError> {
        let outcome =
            consolidate::consolidate(ctx, memory, &self.in_flight, &self.settings(), session)
                .await?;
        match &outcome {
            Outcome::Consolidated {
                saved,
                skipped,
                conflicts,
            } => tracing::info!(
                %session, saved, skipped, conflicts, "session consolidated"
            ),
            Outcome::Skipped(reason) => {
                tracing::info!(%session, %reason, "consolidation skipped")
            }
            Outcome::GivenUp(attempts) => tracing::info!(
                %session, attempts, "consolidation given up; `mnemo jobs retry` tries it again"
            ),
            Outcome::Failed(reason) => {
                tracing::warn!(%session, %reason, "consolidation failed; the session stays pending")
            }
        }
        Ok(outcome)
    }

    async fn consolidate_pending(
        &self,
        ctx: &KernelContext,
        memory: &dyn MemoryApi,
    ) -> Result<JobReport, BoxError> {
        if ctx.llm().is_none() {
            tracing::info!("consolidation skipped: no LLM is configured ([llm] in config.toml)");
            return Ok(JobReport::new("skipped: no LLM is configured"));
        }
        let pending = memory.get_pending_consolidations().await?;
        let (mut done, mut failed, mut skipped, mut facts, mut given_up) = (0, 0u64, 0, 0, 0u64);
        let mut first_failure = None;
        for session in pending {
            // As the reference does, the night job announces each session it found complete,
            // so that every subscriber sees it, as when a user starts a new session. This
            // extension handles the announcement here, as its handler would, so that the run's
            // report counts what was consolidated.
            announce_completed(ctx, &session.session).await;
            match self.consolidate_one(ctx, memory, &session.session).await? {
                Outcome::Consolidated { saved, .. } => {
                    done += 1;
                    facts += saved;
                }
                Outcome::Skipped(_) => skipped += 1,
                Outcome::GivenUp(_) => given_up += 1,
                Outcome::Failed(reason) => {
                    failed += 1;
                    first_failure.get_or_insert(format!("{}: {reason}", session.session));
                }
            }
        }
        // The first failure's reason, so that the run's summary says what to fix.
        let why = first_failure.map_or(String::new(), |first| format!(" (first: {first})"));
        let given_up_note = given_up_note(
            given_up,
            "sessions",
            "max_consolidation_attempts",
            self.config.max_consolidation_attempts,
        );
        // A session given up on is work the job does not do until someone acts: it counts
        // as failed, so that `mnemo jobs run` exits with an error while any is left.
        Ok(JobReport::new(format!(
            "{done} sessions consolidated ({facts} facts), {failed} failed{why}, \
             {skipped} skipped{given_up_note}"
        ))
        .with_failed(failed + given_up))
    }

    fn memory(ctx: &KernelContext) -> Result<Arc<dyn MemoryApi>, BoxError> {
        ctx.services()
            .get::<dyn MemoryApi>()
            .ok_or_else(|| "the memory extension is not enabled".into())
    }

    async fn enrich(&self, memory: &dyn MemoryApi) -> Result<JobReport, BoxError> {
        if !memory.accurate_ner_available() {
            tracing::info!(
                "entity enrichment skipped: no accurate NER provider (an LLM) is available"
            );
            return Ok(JobReport::new("skipped: no accurate NER provider"));
        }
        let candidates = memory
            .get_memories_for_entity_enrichment(
                &[MemoryKind::Fact, MemoryKind::Episode],
                self.config.enrichment_max_entities,
                self.config.max_enrichment_attempts,
                self.config.enrichment_batch,
            )
            .await?;
        // Counted before this run's attempts: a memory that fails its last attempt now is
        // "failed" in this report and "given up" in the next ones, as a session is.
        let given_up = memory
            .count_enrichments_given_up(
                &[MemoryKind::Fact, MemoryKind::Episode],
                self.config.max_enrichment_attempts,
            )
            .await?;
        let (mut enriched, mut failed) = (0, 0u64);
        for candidate in &candidates {
            match memory.enrich_memory_entities(&candidate.id).await {
                Ok(_) => enriched += 1,
                Err(error) => {
                    failed += 1;
                    tracing::warn!(memory_id = %candidate.id, %error, "enrichment failed; retried next run, up to max_enrichment_attempts");
                }
            }
        }
        let given_up_note = given_up_note(
            given_up,
            "memories",
            "max_enrichment_attempts",
            self.config.max_enrichment_attempts,
        );
        Ok(JobReport::new(format!(
            "{enriched} memories enriched, {failed} failed{given_up_note}"
        ))
        .with_failed(failed + given_up))
    }
}

/// What a job's report adds for the `count` items (`what`) it gave up on after `max` failed
/// attempts (the `key` that sets it), pointing to the command that tries them again; nothing
/// when there are none.
fn given_up_note(count: u64, what: &str, key: &str, max: i64) -> String {
    if count == 0 {
        return String::new();
    }
    format!(
        ", {count} {what} given up after {max} failed attempts ({key}): \
         `mnemo jobs retry` has the next run try them again"
    )
}

/// Publishes `memory.session_completed` for `session` to every subscriber but this extension,
/// which consolidates it itself; a failure to publish (shutdown) is logged, not fatal.
async fn announce_completed(ctx: &KernelContext, session: &SessionKey) {
    let completed = SessionCompleted {
        session: session.clone(),
    };
    let published = match completed.to_payload() {
        Ok(payload) => {
            let event = Event::new(ctx.now(), payload).with_scope(
                None,
                Some(session.user_id.clone()),
                session.chat_id.clone(),
            );
            ctx.publish_except(event, NAME)
                .await
                .map(drop)
                .map_err(|error| error.to_string())
        }
        Err(error) => Err(error.to_string()),
    };
    if let Err(error) = published {
        tracing::warn!(%session, %error, "could not announce a completed session");
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "consolidation, decay and enrichment jobs",
        build: |section: &ExtensionSection| {
            let config: MemoryMaintenanceConfig = section.parse_checked()?;
            Ok(Arc::new(MemoryMaintenanceExtension::new(config)) as Arc<dyn Extension>)
        },
    }
}

#[async_trait]
impl Extension for MemoryMaintenanceExtension {
    fn name(&self) -> &str {
        NAME
    }

    async fn start(&self, ctx: &KernelContext) -> Result<(), BoxError> {
        Self::memory(ctx)?;
        Ok(())
    }

    fn scheduler_provider(&self) -> Option<&dyn SchedulerProvider> {
        Some(self)
    }

    fn event_handler(&self) -> Option<&dyn EventHandler> {
        Some(self)
    }
}

#[async_trait]
impl EventHandler for MemoryMaintenanceExtension {
    fn topics(&self) -> Vec<String> {
        vec![SessionCompleted::TOPIC.to_owned()]
    }

    async fn handle(&self, ctx: &KernelContext, event: &Event) -> Result<(), BoxError> {
        let Some(completed) = event.decode::<SessionCompleted>() else {
            return Ok(());
        };
        let completed = completed?;
        if ctx.llm().is_none() {
            tracing::debug!(session = %completed.session, "no LLM: the session waits for one");
            return Ok(());
        }
        let memory = Self::memory(ctx)?;
        self.consolidate_one(ctx, memory.as_ref(), &completed.session)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl SchedulerProvider for MemoryMaintenanceExtension {
    fn jobs(&self) -> Vec<JobSpec> {
        vec![
            JobSpec {
                name: JOB_ENRICHMENT.to_owned(),
                cron: self.config.enrichment_cron.clone(),
                description: "re-extract entities of memories with few links (accurate NER)"
                    .to_owned(),
            },
            JobSpec {
                name: JOB_CONSOLIDATION.to_owned(),
                cron: self.config.consolidation_cron.clone(),
                description: "consolidate every pending session into facts (LLM)".to_owned(),
            },
            JobSpec {
                name: JOB_DECAY.to_owned(),
                cron: self.config.decay_cron.clone(),
                description: match self.config.decay_action {
                    DecayAction::Archive => {
                        "Ebbinghaus decay of facts; those below the threshold fade out of the context"
                    }
                    DecayAction::SoftDelete => {
                        "Ebbinghaus decay of facts; those below the threshold are soft-deleted"
                    }
                }
                .to_owned(),
            },
        ]
    }

    async fn run_job(&self, ctx: &KernelContext, name: &str) -> Result<JobReport, BoxError> {
        let memory = Self::memory(ctx)?;
        match name {
            JOB_DECAY => {
                let report = memory
                    .run_decay(self.config.decay_threshold, self.config.decay_action)
                    .await?;
                let removed = match self.config.decay_action {
                    DecayAction::Archive => format!("{} faded", report.faded),
                    DecayAction::SoftDelete => format!("{} soft-deleted", report.soft_deleted),
                };
                Ok(JobReport::new(format!(
                    "{} facts decayed, {removed}",
                    report.decayed
                )))
            }
            JOB_ENRICHMENT => self.enrich(memory.as_ref()).await,
            JOB_CONSOLIDATION => self.consolidate_pending(ctx, memory.as_ref()).await,
            other => Err(format!("unknown job `{other}`").into()),
        }
    }
}
