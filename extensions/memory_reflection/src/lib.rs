//! The `memory_reflection` extension: a weekly reflection over recent facts and episodes, saved as a
//! `reflection` memory. It owns no data.
//!
//! Status: this crate holds the extension's name, factory and config section so that hosts can
//! register it and `config.toml` can switch it on. Its behaviour lands with issue #5; until then
//! the extension starts, takes no role, and its config section accepts no keys.

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{Extension, ExtensionFactory, ExtensionSection};
use serde::{Deserialize, Serialize};

/// The config key, folder and extension name.
pub const NAME: &str = "memory_reflection";

/// `[extensions.memory_reflection]`; keys arrive with the extension's behaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryReflectionConfig {}

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

    /// The configuration it was built with.
    pub fn config(&self) -> &MemoryReflectionConfig {
        &self.config
    }
}

#[async_trait]
impl Extension for MemoryReflectionExtension {
    fn name(&self) -> &str {
        NAME
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "weekly reflection job (issue #5)",
        build: |section: &ExtensionSection| {
            let config: MemoryReflectionConfig = section.parse()?;
            Ok(Arc::new(MemoryReflectionExtension::new(config)) as Arc<dyn Extension>)
        },
    }
}
