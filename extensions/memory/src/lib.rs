//! The `memory` extension: the SQLite store of episodes, facts, reflections and entities, hybrid
//! search fused by Reciprocal Rank Fusion, context injection before each turn, and the agent's memory tools.
//!
//! Status: this crate holds the extension's name, factory and config section so that hosts can
//! register it and `config.toml` can switch it on. Its behaviour lands with issue #3; until then
//! the extension starts, takes no role, and its config section accepts no keys.

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{Extension, ExtensionFactory, ExtensionSection};
use serde::{Deserialize, Serialize};

/// The config key, folder and extension name.
pub const NAME: &str = "memory";

/// `[extensions.memory]`; keys arrive with the extension's behaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {}

/// The `memory` extension.
#[derive(Debug, Default)]
pub struct MemoryExtension {
    config: MemoryConfig,
}

impl MemoryExtension {
    /// The extension with `config`.
    pub fn new(config: MemoryConfig) -> Self {
        Self { config }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }
}

#[async_trait]
impl Extension for MemoryExtension {
    fn name(&self) -> &str {
        NAME
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "long-term memory store, hybrid search and context (issue #3)",
        build: |section: &ExtensionSection| {
            let config: MemoryConfig = section.parse()?;
            Ok(Arc::new(MemoryExtension::new(config)) as Arc<dyn Extension>)
        },
    }
}
