//! The `ner` extension: named-entity extraction with regex, pattern and LLM providers, composed into
//! strategies (`fast`, `accurate`). Pure: text in, entities out.
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
pub const NAME: &str = "ner";

/// `[extensions.ner]`; keys arrive with the extension's behaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NerConfig {}

/// The `ner` extension.
#[derive(Debug, Default)]
pub struct NerExtension {
    config: NerConfig,
}

impl NerExtension {
    /// The extension with `config`.
    pub fn new(config: NerConfig) -> Self {
        Self { config }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &NerConfig {
        &self.config
    }
}

#[async_trait]
impl Extension for NerExtension {
    fn name(&self) -> &str {
        NAME
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "named-entity extraction (issue #4)",
        build: |section: &ExtensionSection| {
            let config: NerConfig = section.parse()?;
            Ok(Arc::new(NerExtension::new(config)) as Arc<dyn Extension>)
        },
    }
}
