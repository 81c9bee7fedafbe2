//! The local provider: a BERT-family sentence model (all-MiniLM-L6-v2 by default) run in-process
//! with candle, mean-pooled over the attention mask and L2-normalised, as sentence-transformers does.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::config::{expand_tilde, EmbeddingConfig, DEFAULT_MODEL_DIR};
use crate::single::SingleTextBert;
use mnemo_embedding_api::{EmbeddingApi, EmbeddingError, EmbeddingHealth};

/// The model configuration file in the model directory.
pub const CONFIG_FILE: &str = "config.json";
/// The tokenizer file in the model directory.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The weights file in the model directory.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The vector size reported before the model is loaded or when it cannot be (all-MiniLM-L6-v2's).
pub const DEFAULT_LOCAL_DIMENSIONS: usize = 384;

/// Why the local model could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelLoadError {
    /// A required file is not in the model directory.
    #[error("embedding model file {} is missing; {hint}", path.display())]
    Missing {
        /// The missing file.
        path: PathBuf,
        /// What to run to install the model.
        hint: String,
    },
    /// A file exists but cannot be read or understood.
    #[error("cannot load {}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Loading panicked inside a dependency (a malformed model).
    #[error("loading the model in {} panicked: {reason}", dir.display())]
    Panicked {
        /// The model directory.
        dir: PathBuf,
        /// The panic message.
        reason: String,
    },
}

/// A loaded model: weights, tokenizer and output size.
struct LoadedModel {
    bert: BertModel,
    /// The same weights laid out for one text at a time (a search's query); `None` on CPUs
    /// without AVX2/FMA/F16C, where single texts go through candle too.
    single: Option<SingleTextBert>,
    tokenizer: Tokenizer,
    dimensions: usize,
}

/// Settings of a [`LocalEmbedder`], shared with its blocking tasks.
struct Inner {
    model_dir: PathBuf,
    max_seq_len: usize,
    batch_size: usize,
    model_id: String,
    state: OnceLock<Result<Arc<LoadedModel>, String>>,
    /// One thread for single texts (a search's query): on two cores, splitting a ten-token
    /// forward pass over both made it slower, and the search's other lists need the other core.
    single: OnceLock<Option<rayon::ThreadPool>>,
}

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
            .field("batch_size", &self.inner.batch_size)
            .field("loaded", &matches!(self.inner.state.get(), Some(Ok(_))))
            .finish()
    }
}

impl LocalEmbedder {
    /// A provider for the model in `model_dir` (a leading `~` is expanded), truncating inputs at
    /// `max_seq_len` tokens and running at most `batch_size` texts per forward pass.
    pub fn new(model_dir: impl AsRef<Path>, max_seq_len: usize, batch_size: usize) -> Self {
        let model_dir = expand_tilde(model_dir.as_ref());
        let model_id = model_dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".to_owned());
        Self {
            inner: Arc::new(Inner {
                model_dir,
                max_seq_len: max_seq_len.max(2),
                batch_size: batch_size.max(1),
                model_id,
                state: OnceLock::new(),
                single: OnceLock::new(),
            }),
        }
    }

    /// The provider `config` describes (its `model_dir`, `max_seq_len` and `batch_size`).
    pub fn from_config(config: &EmbeddingConfig) -> Self {
        Self::new(&config.model_dir, config.max_seq_len, config.batch_size)
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

impl Inner {
    fn model(&self) -> Result<Arc<LoadedModel>, String> {
        self.state
            .get_or_init(|| {
                let started = Instant::now();
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    load_model(&self.model_dir, self.max_seq_len)
                }))
                .unwrap_or_else(|panic| {
                    Err(ModelLoadError::Panicked {
                        dir: self.model_dir.clone(),
                        reason: panic_message(panic.as_ref()),
                    })
                });
                match outcome {
                    Ok(model) => {
                        tracing::info!(
                            model_dir = %self.model_dir.display(),
                            dimensions = model.dimensions,
                            elapsed_ms = started.elapsed().as_millis() as u64,
                            "local embedding model loaded"
                        );
                        Ok(Arc::new(model))
                    }
                    Err(error) => {
                        let reason = error.to_string();
                        tracing::warn!(
                            model_dir = %self.model_dir.display(),
                            "local embeddings unavailable: {reason}"
                        );
                        Err(reason)
                    }
                }
            })
            .clone()
    }

    fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let model = self.model().map_err(EmbeddingError::Unavailable)?;
        if let Some(single) = &model.single {
            let embed_one = |text: &String| -> Result<Vec<f32>, EmbeddingError> {
                let encoding = model
                    .tokenizer
                    .encode(text.as_str(), true)
                    .map_err(|err| failed("tokenizer", err))?;
                single
                    .embed(encoding.get_ids(), encoding.get_type_ids())
                    .map_err(|err| failed("inference", err))
            };
            // A batch too goes text by text through the packed forward, the texts spread over
            // the cores: each text computes only its own tokens (no padding to the longest), and
            // the packed half-precision weights beat candle's products at these sizes (the
            // embed_bench example: 148 sentences/s through candle's padded batches).
            return match texts {
                [text] => Ok(vec![embed_one(text)?]),
                _ => {
                    use rayon::prelude::*;
                    texts.par_iter().map(embed_one).collect()
                }
            };
        }
        if let [text] = texts {
            let single = self.single.get_or_init(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(|_| "mnemo-embed-query".to_owned())
                    .build()
                    .map_err(|err| tracing::warn!("no single-thread pool for queries: {err}"))
                    .ok()
            });
            if let Some(pool) = single {
                return pool.install(|| model.embed_chunk(vec![text.as_str()]));
            }
        }
        // Without the fast path (a CPU without AVX2/FMA): candle's batches.
        // Similar lengths share a forward pass, so that little padding is computed.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&text_idx| texts[text_idx].len());
        let mut vectors = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(self.batch_size) {
            let inputs: Vec<&str> = chunk
                .iter()
                .map(|&text_idx| texts[text_idx].as_str())
                .collect();
            let chunk_vectors = model.embed_chunk(inputs)?;
            for (&text_idx, vector) in chunk.iter().zip(chunk_vectors) {
                vectors[text_idx] = vector;
            }
        }
        Ok(vectors)
    }
}

/// The hint for a missing model: the command that installs it into `dir`.
fn fetch_hint(dir: &Path) -> String {
    if dir == expand_tilde(Path::new(DEFAULT_MODEL_DIR)) {
        "run `scripts/fetch-model` to install all-MiniLM-L6-v2".to_owned()
    } else {
        format!(
            "run `MNEMO_MODEL_DIR={} scripts/fetch-model` to install all-MiniLM-L6-v2 there",
            dir.display()
        )
    }
}

fn load_model(dir: &Path, max_seq_len: usize) -> Result<LoadedModel, ModelLoadError> {
    let config_path = dir.join(CONFIG_FILE);
    let tokenizer_path = dir.join(TOKENIZER_FILE);
    let weights_path = dir.join(WEIGHTS_FILE);
    for path in [&config_path, &tokenizer_path, &weights_path] {
        if !path.is_file() {
            return Err(ModelLoadError::Missing {
                path: path.clone(),
                hint: fetch_hint(dir),
            });
        }
    }
    let invalid = |path: &Path, reason: String| ModelLoadError::Invalid {
        path: path.to_path_buf(),
        reason,
    };

    let config_text = std::fs::read_to_string(&config_path)
        .map_err(|err| invalid(&config_path, err.to_string()))?;
    let bert_config: BertConfig = serde_json::from_str(&config_text)
        .map_err(|err| invalid(&config_path, format!("not a BERT config.json: {err}")))?;

    let mut max_len = max_seq_len;
    if max_len > bert_config.max_position_embeddings {
        tracing::warn!(
            max_seq_len,
            max_position_embeddings = bert_config.max_position_embeddings,
            "max_seq_len is longer than the model accepts; using the model's limit"
        );
        max_len = bert_config.max_position_embeddings;
    }

    let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
        .map_err(|err| invalid(&tokenizer_path, err.to_string()))?;
    // The shipped tokenizer.json pads every input to 128 tokens and truncates at 128: pad each
    // batch to its longest input instead, and truncate at `max_seq_len`. Never to a multiple of
    // some size: the packed forward takes a single text without an attention mask, so a padding
    // token there would be read as text.
    let padding = PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        pad_to_multiple_of: None,
        ..tokenizer.get_padding().cloned().unwrap_or_default()
    };
    tokenizer.with_padding(Some(padding));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_len,
            ..TruncationParams::default()
        }))
        .map_err(|err| invalid(&tokenizer_path, err.to_string()))?;

    let weights = mmap_weights(&weights_path).map_err(|err| invalid(&weights_path, err))?;
    let single = SingleTextBert::load(&weights, &bert_config).unwrap_or_else(|reason| {
        tracing::warn!(
            weights = %weights_path.display(),
            "single texts will use the batch path: {reason}"
        );
        None
    });
    let bert = BertModel::load(weights, &bert_config)
        .map_err(|err| invalid(&weights_path, format!("not a BERT model: {err}")))?;
    Ok(LoadedModel {
        bert,
        single,
        tokenizer,
        dimensions: bert_config.hidden_size,
    })
}

/// Memory-maps the safetensors weights (f32, CPU).
#[allow(unsafe_code)]
fn mmap_weights(path: &Path) -> Result<VarBuilder<'static>, String> {
    // SAFETY: `from_mmaped_safetensors` is unsafe because the mapped file must not change while
    // mapped. mnemo only reads the model files, and `scripts/fetch-model` installs a model by
    // renaming a complete directory into place, never by rewriting files in place; a user editing
    // model.safetensors under a running process is outside what we support.
    unsafe { VarBuilder::from_mmaped_safetensors(&[path], DType::F32, &Device::Cpu) }
        .map_err(|err| err.to_string())
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "unknown panic".to_owned()
    }
}

fn failed(what: &str, err: impl fmt::Display) -> EmbeddingError {
    EmbeddingError::Failed(format!("{what}: {err}"))
}

impl LoadedModel {
    /// One forward pass: tokenise (padded to the longest text), run BERT, mean-pool over the
    /// attention mask, L2-normalise.
    fn embed_chunk(&self, texts: Vec<&str>) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let n_texts = texts.len();
        let encodings = self
            .tokenizer
            .encode_batch(texts, true)
            .map_err(|err| failed("tokenizer", err))?;
        let n_tokens = encodings.first().map_or(0, |encoding| encoding.len());
        let mut ids = Vec::with_capacity(n_texts * n_tokens);
        let mut type_ids = Vec::with_capacity(n_texts * n_tokens);
        let mut mask = Vec::with_capacity(n_texts * n_tokens);
        for encoding in &encodings {
            ids.extend_from_slice(encoding.get_ids());
            type_ids.extend_from_slice(encoding.get_type_ids());
            mask.extend_from_slice(encoding.get_attention_mask());
        }
        let tensor = |values: Vec<u32>| {
            Tensor::from_vec(values, (n_texts, n_tokens), &Device::Cpu)
                .map_err(|err| failed("input tensor", err))
        };
        let (ids, type_ids, mask) = (tensor(ids)?, tensor(type_ids)?, tensor(mask)?);
        let inference = || -> candle_core::Result<Vec<Vec<f32>>> {
            let hidden = self.bert.forward(&ids, &type_ids, Some(&mask))?;
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.maximum(1e-9)?;
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.maximum(1e-12)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        inference().map_err(|err| failed("inference", err))
    }
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

    /// The tokens of `text` with `[CLS]` and `[SEP]`, at most `max_seq_len` (loading the model
    /// now if needed, which blocks); `None` if it cannot be loaded.
    fn token_count(&self, text: &str) -> Option<usize> {
        let model = self.inner.model().ok()?;
        let encoding = model.tokenizer.encode(text, true).ok()?;
        Some(encoding.get_ids().len())
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
