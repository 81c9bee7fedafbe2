//! The `ner` extension: named-entity extraction for mnemo's memory. Pure: text in, entities out.
//!
//! Providers find entities: `regex` (@mentions, #hashtags, e-mail addresses, URLs, absolute
//! dates), `pattern` (people with their relation to the speaker, organisations and places, from
//! the phrasings people use in chat; no model) and `llm` (the kernel's language model). Strategies
//! compose them, as `[extensions.ner]` says: `fast` (default `regex` + `pattern`, synchronous, for
//! every stored memory) and `accurate` (default adding `llm`, for nightly enrichment). Results
//! are merged by span overlap: the highest confidence wins, then the longest span; the output is
//! sorted by start offset.
//!
//! The extension publishes a [`NerService`] as `dyn` [`NerApi`] in the kernel's services at
//! registration, and attaches the kernel's language model to it at start.
#![warn(missing_docs)]

mod config;
mod merge;
mod providers;
mod service;

pub use config::{NerConfig, ProviderName};
pub use mnemo_ner_api::*;
pub use service::NerService;

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, Extension, ExtensionFactory, ExtensionSection, KernelContext, Registrar,
};

/// The config key, folder and extension name.
pub const NAME: &str = "ner";

/// The `ner` extension: holds the [`NerService`] it publishes as `dyn NerApi`.
#[derive(Debug, Default)]
pub struct NerExtension {
    config: NerConfig,
    service: Arc<NerService>,
}

impl NerExtension {
    /// The extension with `config` (check it first with [`NerConfig::problems`]; the factory
    /// does).
    pub fn new(config: NerConfig) -> Self {
        let service = Arc::new(NerService::new(&config));
        Self { config, service }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &NerConfig {
        &self.config
    }

    /// The service it publishes.
    pub fn service(&self) -> Arc<NerService> {
        Arc::clone(&self.service)
    }
}

#[async_trait]
impl Extension for NerExtension {
    fn name(&self) -> &str {
        NAME
    }

    fn register(&self, registrar: &mut Registrar<'_>) -> Result<(), BoxError> {
        registrar.provide::<dyn NerApi>(self.service() as Arc<dyn NerApi>);
        Ok(())
    }

    async fn start(&self, ctx: &KernelContext) -> Result<(), BoxError> {
        if self.config.accurate.contains(&ProviderName::Llm) {
            match ctx.llm() {
                Some(llm) => {
                    tracing::info!(model = llm.model(), "ner: accurate strategy uses the model");
                    self.service.attach_llm(llm);
                }
                // The default lists `llm` for when a model is configured: without one, that is
                // the expected set-up, not a mistake, and the default config stays quiet. A list
                // the user wrote themselves asked for the model, so its absence is worth a warning.
                None if self.config.accurate == NerConfig::default().accurate => tracing::info!(
                    "ner: no language model is configured in [llm], so the accurate strategy \
                     (nightly entity enrichment) is unavailable"
                ),
                None => tracing::warn!(
                    "ner: `accurate` lists `llm` but no language model is configured in [llm]; \
                     accurate extraction is unavailable"
                ),
            }
        }
        Ok(())
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "named-entity extraction: regex, pattern and LLM providers",
        build: |section: &ExtensionSection| {
            let config: NerConfig = section.parse_checked()?;
            Ok(Arc::new(NerExtension::new(config)) as Arc<dyn Extension>)
        },
    }
}
