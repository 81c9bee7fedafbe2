//! The local provider: a BERT-family sentence model (all-MiniLM-L6-v2 by default) run in-process
//! with candle, mean-pooled over the attention mask and L2-normalised, as sentence-transformers does.
//!
//! A text longer than `max_seq_len` tokens is read as passages: its first `max_seq_len` tokens,
//! then windows of the same size, each starting [`PASSAGE_OVERLAP`] tokens before the last one
//! ended, at most `max_passages` of them. The passages' vectors are averaged, weighted by their
//! length in tokens, and normalised again, so that a long turn's later paragraphs count too
//! instead of being cut off. A text that fits in one passage gets exactly the vector it got
//! before passages existed.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use candle_transformers::models::bert::BertModel;
use tokenizers::Tokenizer;

use crate::config::{expand_tilde, EmbeddingConfig, DEFAULT_MAX_PASSAGES};
use crate::single::SingleTextBert;
use mnemo_embedding_api::{EmbeddingApi, EmbeddingError, EmbeddingHealth};
use passages::Frame;

mod forward;
mod load;
mod passages;

pub use load::ModelLoadError;

/// The model configuration file in the model directory.
pub const CONFIG_FILE: &str = "config.json";
/// The tokenizer file in the model directory.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The weights file in the model directory.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The vector size reported before the model is loaded or when it cannot be (all-MiniLM-L6-v2's).
pub const DEFAULT_LOCAL_DIMENSIONS: usize = 384;
/// Tokens a passage repeats from the end of the one before it, so that a sentence cut at a
/// passage's end is read whole in the next (at most half a passage, for a short `max_seq_len`).
pub const PASSAGE_OVERLAP: usize = 32;

/// A loaded model: weights, tokenizer and output size.
struct LoadedModel {
    bert: BertModel,
    /// The same weights laid out for one text at a time (a search's query); `None` on CPUs
    /// without AVX2/FMA/F16C, where single texts go through candle too.
    single: Option<SingleTextBert>,
    /// Splits text into tokens; neither truncates nor pads (passages are cut in
    /// [`LoadedModel::passages`], and candle's batches padded in [`LoadedModel::embed_chunk`]).
    tokenizer: Tokenizer,
    /// The special tokens the tokenizer puts around one text.
    frame: Frame,
    /// The padding token's id, for candle's batches.
    pad_id: u32,
    /// The longest passage in tokens, the frame's included.
    max_len: usize,
    dimensions: usize,
}

/// Settings of a [`LocalEmbedder`], shared with its blocking tasks.
struct Inner {
    model_dir: PathBuf,
    max_seq_len: usize,
    max_passages: usize,
    batch_size: usize,
    model_id: String,
    state: OnceLock<Result<Arc<LoadedModel>, String>>,
    /// One thread for single texts (a search's query): on two cores, splitting a ten-token
    /// forward pass over both made it slower, and the search's other lists need the other core.
    single: OnceLock<Option<rayon::ThreadPool>>,
    /// The threads that embed batches (the indexer's), one per core, at a lower scheduling
    /// priority ([`BATCH_NICENESS`]): they use the cores the requests leave idle, and an ingest
    /// or a search (on the runtime's threads, and the query's `single` thread) never waits
    /// behind a backlog being embedded.
    batches: OnceLock<Option<rayon::ThreadPool>>,
}

/// How much lower the batch threads' priority is than the process's (Linux `nice`, per thread).
const BATCH_NICENESS: libc::c_int = 10;

/// The local embedding provider. Creating it does no I/O: the model loads on
/// [`LocalEmbedder::load`] (the extension calls it from `start`) or on first use.
///
/// A load failure (such as missing files) is final for this value: [`EmbeddingApi::health`] then
/// says why and how to fix it, and [`EmbeddingApi::embed`] returns
/// [`EmbeddingError::Unavailable`]. Cheap to clone; clones share the model.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_dir", &self.inner.model_dir)
            .field("max_seq_len", &self.inner.max_seq_len)
            .field("max_passages", &self.inner.max_passages)
            .field("batch_size", &self.inner.batch_size)
            .field("loaded", &matches!(self.inner.state.get(), Some(Ok(_))))
            .finish()
    }
}

impl LocalEmbedder {
    /// A provider for the model in `model_dir` (a leading `~` is expanded), reading inputs in
    /// passages of `max_seq_len` tokens (at most [`DEFAULT_MAX_PASSAGES`]; see
    /// [`Self::with_max_passages`]) and running at most `batch_size` passages per forward pass.
    pub fn new(model_dir: impl AsRef<Path>, max_seq_len: usize, batch_size: usize) -> Self {
        let model_dir = expand_tilde(model_dir.as_ref());
        let model_id = model_dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".to_owned());
        Self {
            inner: Arc::new(Inner {
                model_dir,
                max_seq_len: max_seq_len.max(3),
                max_passages: DEFAULT_MAX_PASSAGES,
                batch_size: batch_size.max(1),
                model_id,
                state: OnceLock::new(),
                single: OnceLock::new(),
                batches: OnceLock::new(),
            }),
        }
    }

    /// The provider `config` describes (its `model_dir`, `max_seq_len`, `max_passages` and
    /// `batch_size`).
    pub fn from_config(config: &EmbeddingConfig) -> Self {
        Self::new(&config.model_dir, config.max_seq_len, config.batch_size)
            .with_max_passages(config.max_passages)
    }

    /// This provider reading at most `max_passages` passages of a long text (at least 1: the
    /// text truncated at `max_seq_len`). Call it before the provider is cloned or used.
    pub fn with_max_passages(self, max_passages: usize) -> Self {
        let inner = &self.inner;
        Self {
            inner: Arc::new(Inner {
                model_dir: inner.model_dir.clone(),
                max_seq_len: inner.max_seq_len,
                max_passages: max_passages.max(1),
                batch_size: inner.batch_size,
                model_id: inner.model_id.clone(),
                state: inner.state.clone(),
                single: OnceLock::new(),
                batches: OnceLock::new(),
            }),
        }
    }

    /// The model directory, with `~` expanded.
    pub fn model_dir(&self) -> &Path {
        &self.inner.model_dir
    }

    /// Loads the model now unless already tried, and reports the outcome. Blocking (file reads
    /// and a memory map, 0.1-0.5 s): call it from `spawn_blocking` in async code.
    pub fn load(&self) -> EmbeddingHealth {
        match self.inner.model() {
            Ok(_) => EmbeddingHealth::Ready,
            Err(reason) => EmbeddingHealth::Unavailable { reason },
        }
    }
}

fn failed(what: &str, err: impl fmt::Display) -> EmbeddingError {
    EmbeddingError::Failed(format!("{what}: {err}"))
}

#[async_trait]
impl EmbeddingApi for LocalEmbedder {
    /// The model's `hidden_size` once loaded (loading it now if needed, which blocks);
    /// [`DEFAULT_LOCAL_DIMENSIONS`] if it cannot be loaded.
    fn dimensions(&self) -> usize {
        self.inner
            .model()
            .map_or(DEFAULT_LOCAL_DIMENSIONS, |model| model.dimensions)
    }

    /// The model directory's name, such as `all-MiniLM-L6-v2`.
    fn model_id(&self) -> &str {
        &self.inner.model_id
    }

    /// Ready once the model is loaded (loading it now if needed, which blocks).
    fn health(&self) -> EmbeddingHealth {
        self.load()
    }

    /// The tokens the model reads of `text`: those of its passages, each with `[CLS]` and
    /// `[SEP]` (loading the model now if needed, which blocks); `None` if it cannot be loaded.
    fn token_count(&self, text: &str) -> Option<usize> {
        let model = self.inner.model().ok()?;
        let passages = model.passages(text, self.inner.max_passages).ok()?;
        Some(passages.iter().map(|passage| passage.ids.len()).sum())
    }

    async fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut vectors = self.embed_batch(&[text.to_owned()]).await?;
        vectors
            .pop()
            .ok_or_else(|| EmbeddingError::Failed("the model returned no vector".to_owned()))
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || inner.embed_blocking(&texts))
            .await
            .map_err(|err| failed("inference task", err))?
    }
}
