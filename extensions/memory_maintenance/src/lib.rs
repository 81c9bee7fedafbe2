//! The `memory_maintenance` extension: scheduled consolidation of finished sessions into facts,
//! deduplication, conflict resolution, Ebbinghaus decay and entity enrichment. It owns no data and
//! drives the `memory` extension through its published API.
//!
//! Status: this crate holds the extension's name, factory and config section so that hosts can
//! register it and `config.toml` can switch it on. Its behaviour lands with issue #5; until then
//! the extension starts, takes no role, and its config section accepts no keys.

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{Extension, ExtensionFactory, ExtensionSection};
use serde::{Deserialize, Serialize};

/// The config key, folder and extension name.
pub const NAME: &str = "memory_maintenance";

/// `[extensions.memory_maintenance]`; keys arrive with the extension's behaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryMaintenanceConfig {}

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

    /// The configuration it was built with.
    pub fn config(&self) -> &MemoryMaintenanceConfig {
        &self.config
    }
}

#[async_trait]
impl Extension for MemoryMaintenanceExtension {
    fn name(&self) -> &str {
        NAME
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "consolidation, decay and enrichment jobs (issue #5)",
        build: |section: &ExtensionSection| {
            let config: MemoryMaintenanceConfig = section.parse()?;
            Ok(Arc::new(MemoryMaintenanceExtension::new(config)) as Arc<dyn Extension>)
        },
    }
}
