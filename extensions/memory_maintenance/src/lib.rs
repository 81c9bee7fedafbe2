//! The `memory_maintenance` extension: scheduled upkeep of the memory store. It owns no data and
//! drives the `memory` extension through its published [`MemoryApi`].
//!
//! Jobs (cron expressions from config, UTC): `execute_entity_enrichment` (02:00) re-extracts
//! entities with the accurate NER strategy for memories with few entities, and `execute_decay`
//! (04:00) applies Ebbinghaus decay and prunes faded facts. Session consolidation by an LLM
//! (`execute_consolidation`, 03:00, and on `memory.session_completed`) lands with issue #5.

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, ConfigError, Extension, ExtensionFactory, ExtensionSection, JobSpec, KernelContext,
    SchedulerProvider,
};
use mnemo_memory::{MemoryApi, MemoryKind};
use serde::{Deserialize, Serialize};

/// The config key, folder and extension name.
pub const NAME: &str = "memory_maintenance";

/// Job names.
pub const JOB_ENRICHMENT: &str = "execute_entity_enrichment";
/// Job names.
pub const JOB_DECAY: &str = "execute_decay";

/// `[extensions.memory_maintenance]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryMaintenanceConfig {
    /// When entity enrichment runs (cron, UTC).
    pub enrichment_cron: String,
    /// When decay runs (cron, UTC).
    pub decay_cron: String,
    /// Facts whose confidence decays below this are soft-deleted.
    pub decay_threshold: f64,
    /// Memories with at most this many entity links are re-extracted.
    pub enrichment_max_entities: usize,
    /// Memories enriched per run.
    pub enrichment_batch: usize,
}

impl Default for MemoryMaintenanceConfig {
    fn default() -> Self {
        Self {
            enrichment_cron: "0 2 * * *".to_owned(),
            decay_cron: "0 4 * * *".to_owned(),
            decay_threshold: 0.05,
            enrichment_max_entities: 2,
            enrichment_batch: 50,
        }
    }
}

/// The `memory_maintenance` extension.
#[derive(Debug, Default)]
pub struct MemoryMaintenanceExtension {
    config: MemoryMaintenanceConfig,
}

impl MemoryMaintenanceExtension {
    /// The extension with `config`.
    pub fn new(config: MemoryMaintenanceConfig) -> Self {
        Self { config }
    }

    fn memory(ctx: &KernelContext) -> Result<Arc<dyn MemoryApi>, BoxError> {
        ctx.services()
            .get::<dyn MemoryApi>()
            .ok_or_else(|| "the memory extension is not enabled".into())
    }

    async fn enrich(&self, memory: &dyn MemoryApi) -> Result<String, BoxError> {
        if !memory.accurate_ner_available() {
            tracing::info!(
                "entity enrichment skipped: no accurate NER provider (an LLM) is available"
            );
            return Ok("skipped: no accurate NER provider".to_owned());
        }
        let candidates = memory
            .get_memories_for_entity_enrichment(
                &[MemoryKind::Fact, MemoryKind::Episode],
                self.config.enrichment_max_entities,
                self.config.enrichment_batch,
            )
            .await?;
        let (mut enriched, mut failed) = (0, 0);
        for candidate in &candidates {
            match memory.enrich_memory_entities(&candidate.id).await {
                Ok(_) => enriched += 1,
                Err(error) => {
                    failed += 1;
                    tracing::warn!(memory_id = %candidate.id, %error, "enrichment failed; retried next run");
                }
            }
        }
        Ok(format!("{enriched} memories enriched, {failed} failed"))
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "consolidation, decay and enrichment jobs",
        build: |section: &ExtensionSection| {
            let config: MemoryMaintenanceConfig = section.parse()?;
            if !(0.0..1.0).contains(&config.decay_threshold) {
                return Err(ConfigError::new(
                    section.file.clone(),
                    "[extensions.memory_maintenance] key `decay_threshold`: must be at least 0 and below 1",
                ));
            }
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
                name: JOB_DECAY.to_owned(),
                cron: self.config.decay_cron.clone(),
                description: "Ebbinghaus decay of facts; prune those below the threshold"
                    .to_owned(),
            },
        ]
    }

    async fn run_job(&self, ctx: &KernelContext, name: &str) -> Result<String, BoxError> {
        let memory = Self::memory(ctx)?;
        match name {
            JOB_DECAY => {
                let report = memory
                    .run_decay_and_prune(self.config.decay_threshold)
                    .await?;
                Ok(format!(
                    "{} facts decayed, {} pruned",
                    report.decayed, report.pruned
                ))
            }
            JOB_ENRICHMENT => self.enrich(memory.as_ref()).await,
            other => Err(format!("unknown job `{other}`").into()),
        }
    }
}
