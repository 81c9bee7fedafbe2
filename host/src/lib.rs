//! The registry of built-in extensions and the embedded default configuration: what the `mnemo`
//! binary hosts.
//!
//! A host of one's own builds a [`mnemo_kernel::host::KernelBuilder`] from [`builtin_extensions`] plus
//! its own factories. [`store_only_extensions`] is the same registry for commands that only read
//! or delete what is stored (`stats`, `check`, `export`, `forget`): it leaves the embedding
//! model unloaded.

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_embedding::{EmbeddingApi, EmbeddingError, EmbeddingHealth};
use mnemo_kernel::host::ExtensionRegistry;
use mnemo_kernel::{
    BoxError, ConfigError, Extension, ExtensionFactory, ExtensionSection, Registrar,
};

/// The default `config.toml`, used when no config file is given or found.
pub const DEFAULT_CONFIG: &str = include_str!("../../config.toml");

/// Every extension the `mnemo` binary ships, keyed by config name.
pub fn builtin_extensions() -> ExtensionRegistry {
    ExtensionRegistry::new()
        .with(mnemo_memory::factory())
        .with(mnemo_memory_maintenance::factory())
        .with(mnemo_memory_reflection::factory())
        .with(mnemo_embedding::factory())
        .with(mnemo_ner::factory())
        .with(mnemo_markdown_memory::factory())
}

/// [`builtin_extensions`] for a command that embeds nothing: the `embedding` section is checked
/// as always, but the model is not loaded (seconds, and hundreds of megabytes); the service it
/// publishes says so, and memory opens its store without vector search, quietly.
pub fn store_only_extensions() -> ExtensionRegistry {
    builtin_extensions().with(ExtensionFactory {
        name: mnemo_embedding::NAME,
        description: "sentence embeddings, model not loaded (the command embeds nothing)",
        build: build_unloaded,
    })
}

/// Why [`store_only_extensions`]'s embedding service embeds nothing.
const UNLOADED: &str = "the embedding model is not loaded: this command embeds nothing";

fn build_unloaded(section: &ExtensionSection) -> Result<Arc<dyn Extension>, ConfigError> {
    // A bad section is reported here as by every other command; the extension built is dropped.
    (mnemo_embedding::factory().build)(section)?;
    Ok(Arc::new(UnloadedEmbedding))
}

/// The `embedding` extension without its model.
#[derive(Debug)]
struct UnloadedEmbedding;

#[async_trait]
impl Extension for UnloadedEmbedding {
    fn name(&self) -> &str {
        mnemo_embedding::NAME
    }

    fn register(&self, registrar: &mut Registrar<'_>) -> Result<(), BoxError> {
        registrar.provide::<dyn EmbeddingApi>(Arc::new(UnloadedEmbedding));
        Ok(())
    }
}

#[async_trait]
impl EmbeddingApi for UnloadedEmbedding {
    fn dimensions(&self) -> usize {
        0
    }

    fn model_id(&self) -> &str {
        "unloaded"
    }

    fn health(&self) -> EmbeddingHealth {
        EmbeddingHealth::Unavailable {
            reason: UNLOADED.to_owned(),
        }
    }

    async fn embed(&self, _text: &str) -> Result<Vec<f32>, EmbeddingError> {
        Err(EmbeddingError::Unavailable(UNLOADED.to_owned()))
    }

    async fn embed_batch(&self, _texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        Err(EmbeddingError::Unavailable(UNLOADED.to_owned()))
    }
}
