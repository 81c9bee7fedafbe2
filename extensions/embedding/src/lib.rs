//! The `embedding` extension: sentence embeddings, computed locally (all-MiniLM-L6-v2 with candle) or
//! by a remote OpenAI-compatible provider. Pure: text in, vectors out.
//!
//! The extension publishes one service, `dyn` [`EmbeddingApi`], in `register`; other extensions
//! (memory) find it in the kernel's `Services`. It takes no other role.
//!
//! - `provider = "local"` (the default) runs a BERT-family sentence model in-process with candle
//!   on the CPU: BERT's last hidden states are mean-pooled over the attention mask, then
//!   L2-normalised, as sentence-transformers does. A text longer than `max_seq_len` tokens is
//!   read as up to `max_passages` overlapping passages whose vectors are averaged (see
//!   `local.rs`), instead of being cut at `max_seq_len`. Tried and tested with
//!   `sentence-transformers/all-MiniLM-L6-v2` (384 dimensions; `tests/it/embedding/fidelity.rs` checks it against
//!   reference vectors from sentence-transformers); any BERT-family sentence model in the same
//!   layout (`config.json`, `tokenizer.json`, `model.safetensors`, mean pooling) works through
//!   `model_dir`. `scripts/fetch-model` installs all-MiniLM-L6-v2 into the default `model_dir`.
//!   The model loads in `start` (off the async threads); if its files are missing the extension
//!   still starts, [`EmbeddingApi::health`] says which file is missing and to run
//!   `scripts/fetch-model`, and [`EmbeddingApi::embed`] returns [`EmbeddingError::Unavailable`].
//! - `provider = "remote"` posts to `{base_url}/embeddings` (OpenAI, Ollama, vLLM, llama.cpp
//!   server) and L2-normalises the answers. The vector size is `dimensions` (also sent to the
//!   server, for Matryoshka models) or the model's known size; `MNEMO_EMBEDDING_API_KEY` overrides
//!   `api_key`.
//!
//! Inference runs on tokio's blocking pool. Vectors from different [`EmbeddingApi::model_id`]s
//! must never be compared.

mod config;
mod local;
mod remote;
mod single;

pub use config::{
    expand_tilde, known_dimensions, EmbeddingConfig, EmbeddingProvider, API_KEY_ENV,
    DEFAULT_BASE_URL, DEFAULT_BATCH_SIZE, DEFAULT_MAX_PASSAGES, DEFAULT_MAX_SEQ_LEN,
    DEFAULT_MODEL_DIR, DEFAULT_REMOTE_MODEL, DEFAULT_TIMEOUT_SECS,
};
pub use local::{
    LocalEmbedder, ModelLoadError, CONFIG_FILE, DEFAULT_LOCAL_DIMENSIONS, PASSAGE_OVERLAP,
    TOKENIZER_FILE, WEIGHTS_FILE,
};
pub use mnemo_embedding_api::*;
pub use remote::RemoteEmbedder;

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, ConfigError, Extension, ExtensionFactory, ExtensionSection, KernelContext, Registrar,
};

/// The config key, folder and extension name.
pub const NAME: &str = "embedding";

/// The provider behind the published service.
#[derive(Debug, Clone)]
enum Backend {
    Local(LocalEmbedder),
    Remote(RemoteEmbedder),
}

/// The `embedding` extension: publishes `dyn EmbeddingApi` and loads the local model in `start`.
#[derive(Debug)]
pub struct EmbeddingExtension {
    config: EmbeddingConfig,
    backend: Backend,
}

impl Default for EmbeddingExtension {
    fn default() -> Self {
        Self::new(EmbeddingConfig::default())
    }
}

impl EmbeddingExtension {
    /// The extension with `config`, used as given (the factory applies the environment and
    /// checks it first). No I/O: the local model loads in `start` or on first use.
    pub fn new(config: EmbeddingConfig) -> Self {
        let backend = match config.provider {
            EmbeddingProvider::Local => Backend::Local(LocalEmbedder::from_config(&config)),
            EmbeddingProvider::Remote => Backend::Remote(RemoteEmbedder::new(&config)),
        };
        Self { config, backend }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &EmbeddingConfig {
        &self.config
    }

    /// The service this extension publishes.
    pub fn api(&self) -> Arc<dyn EmbeddingApi> {
        match &self.backend {
            Backend::Local(local) => Arc::new(local.clone()),
            Backend::Remote(remote) => Arc::new(remote.clone()),
        }
    }
}

#[async_trait]
impl Extension for EmbeddingExtension {
    fn name(&self) -> &str {
        NAME
    }

    fn register(&self, registrar: &mut Registrar<'_>) -> Result<(), BoxError> {
        registrar.provide::<dyn EmbeddingApi>(self.api());
        Ok(())
    }

    async fn start(&self, ctx: &KernelContext) -> Result<(), BoxError> {
        let _ = ctx;
        match &self.backend {
            Backend::Local(local) => {
                let loader = local.clone();
                // A failure is logged by the loader and reported by `health()`; start goes on.
                let health = tokio::task::spawn_blocking(move || loader.load()).await?;
                if health == EmbeddingHealth::Ready {
                    tracing::info!(
                        model_id = local.model_id(),
                        dimensions = local.dimensions(),
                        "local embeddings ready"
                    );
                }
            }
            Backend::Remote(remote) => match remote.health() {
                EmbeddingHealth::Ready => tracing::info!(
                    model_id = remote.model_id(),
                    endpoint = remote.endpoint(),
                    dimensions = remote.dimensions(),
                    "remote embeddings configured"
                ),
                EmbeddingHealth::Unavailable { reason } => {
                    tracing::warn!("remote embeddings unavailable: {reason}");
                }
            },
        }
        Ok(())
    }
}

/// Builds the extension from `[extensions.embedding]`: parses it, applies
/// `MNEMO_EMBEDDING_API_KEY` from the environment, and checks the values.
///
/// # Errors
/// A [`ConfigError`] listing every problem of the section.
pub fn build(section: &ExtensionSection) -> Result<EmbeddingExtension, ConfigError> {
    let mut config: EmbeddingConfig = section.parse()?;
    config.apply_env(|key| std::env::var(key).ok());
    let config = section.check(config)?;
    Ok(EmbeddingExtension::new(config))
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "local (all-MiniLM-L6-v2 with candle) and remote sentence embeddings",
        build: |section: &ExtensionSection| Ok(Arc::new(build(section)?) as Arc<dyn Extension>),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> ExtensionSection {
        ExtensionSection::new(NAME, toml::from_str(text).expect("test TOML is valid"))
    }

    #[test]
    fn factory_builds_without_touching_the_model() {
        let extension = build(&section("model_dir = \"/nonexistent/model\""))
            .expect("a missing model is not a config error");
        assert_eq!(extension.name(), NAME);
        assert_eq!(extension.api().model_id(), "model");
    }

    #[test]
    fn factory_reports_every_problem() {
        let error = build(&section(
            "provider = \"remote\"\nmodel = \"custom\"\nbatch_size = 0",
        ))
        .expect_err("two problems");
        assert_eq!(error.problems.len(), 2, "{error}");
        assert!(error.problems[0].starts_with("[extensions.embedding] key `batch_size`"));
    }

    #[test]
    fn the_shipped_config_file_documents_the_defaults() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config.toml");
        let config =
            mnemo_kernel::host::Config::load(std::path::Path::new(path)).expect("config.toml");
        let parsed: EmbeddingConfig = config
            .extension(NAME)
            .expect("config.toml has [extensions.embedding]")
            .parse()
            .expect("its keys are valid");
        assert_eq!(parsed, EmbeddingConfig::default());
    }
}
