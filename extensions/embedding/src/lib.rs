//! The `embedding` extension: sentence embeddings, computed locally (all-MiniLM-L6-v2 with candle) or
//! by a remote OpenAI-compatible provider. Pure: text in, vectors out.
//!
//! Status: this crate holds the extension's name, factory and config section so that hosts can
//! register it and `config.toml` can switch it on. Its behaviour lands with issue #4; until then
//! the extension starts, takes no role, and its config section accepts no keys.

mod api;

pub use api::*;

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{Extension, ExtensionFactory, ExtensionSection};
use serde::{Deserialize, Serialize};

/// The config key, folder and extension name.
pub const NAME: &str = "embedding";

/// `[extensions.embedding]`; keys arrive with the extension's behaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingConfig {}

/// The `embedding` extension.
#[derive(Debug, Default)]
pub struct EmbeddingExtension {
    config: EmbeddingConfig,
}

impl EmbeddingExtension {
    /// The extension with `config`.
    pub fn new(config: EmbeddingConfig) -> Self {
        Self { config }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &EmbeddingConfig {
        &self.config
    }
}

#[async_trait]
impl Extension for EmbeddingExtension {
    fn name(&self) -> &str {
        NAME
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "local and remote sentence embeddings (issue #4)",
        build: |section: &ExtensionSection| {
            let config: EmbeddingConfig = section.parse()?;
            Ok(Arc::new(EmbeddingExtension::new(config)) as Arc<dyn Extension>)
        },
    }
}
