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
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use tokenizers::Tokenizer;

use crate::config::{expand_tilde, EmbeddingConfig, DEFAULT_MAX_PASSAGES, DEFAULT_MODEL_DIR};
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
/// Tokens a passage repeats from the end of the one before it, so that a sentence cut at a
/// passage's end is read whole in the next (at most half a passage, for a short `max_seq_len`).
pub const PASSAGE_OVERLAP: usize = 32;

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

/// What the model reads of a text at once: token and token-type ids, special tokens included.
#[derive(Debug, Clone, PartialEq)]
struct Passage {
    ids: Vec<u32>,
    type_ids: Vec<u32>,
}

/// The special tokens (`[CLS]` before and `[SEP]` after, for BERT) and token types the
/// tokenizer's template puts around a single text, learnt by encoding one word.
#[derive(Debug, Clone)]
struct Frame {
    before: Vec<(u32, u32)>,
    after: Vec<(u32, u32)>,
    text_type_id: u32,
}

impl Frame {
    fn of(tokenizer: &Tokenizer) -> Result<Self, String> {
        let probe = tokenizer
            .encode("word", true)
            .map_err(|err| err.to_string())?;
        let special = probe.get_special_tokens_mask();
        let pairs: Vec<(u32, u32)> = probe
            .get_ids()
            .iter()
            .copied()
            .zip(probe.get_type_ids().iter().copied())
            .collect();
        let first = special
            .iter()
            .position(|&mask| mask == 0)
            .ok_or("the tokenizer returns no token for a word")?;
        let last = special.iter().rposition(|&mask| mask == 0).unwrap_or(first);
        Ok(Self {
            before: pairs[..first].to_vec(),
            after: pairs[last + 1..].to_vec(),
            text_type_id: pairs[first].1,
        })
    }

    fn len(&self) -> usize {
        self.before.len() + self.after.len()
    }

    /// `tokens` framed.
    fn around(&self, tokens: &[u32]) -> Passage {
        let ids = self
            .before
            .iter()
            .map(|&(id, _)| id)
            .chain(tokens.iter().copied())
            .chain(self.after.iter().map(|&(id, _)| id))
            .collect();
        let type_ids = self
            .before
            .iter()
            .map(|&(_, type_id)| type_id)
            .chain(std::iter::repeat_n(self.text_type_id, tokens.len()))
            .chain(self.after.iter().map(|&(_, type_id)| type_id))
            .collect();
        Passage { ids, type_ids }
    }
}

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

/// Lowers the calling thread's scheduling priority by [`BATCH_NICENESS`]; a failure is logged
/// and the thread keeps its priority.
#[allow(unsafe_code)]
fn lower_this_threads_priority() {
    #[cfg(target_os = "linux")]
    {
        // On Linux a nice value is a thread's own: `setpriority` on the thread id changes only it.
        // SAFETY: plain system calls on this thread's own id, with no pointers.
        let changed = unsafe {
            let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
            let current = libc::getpriority(libc::PRIO_PROCESS, thread);
            libc::setpriority(
                libc::PRIO_PROCESS,
                thread,
                current.saturating_add(BATCH_NICENESS),
            )
        };
        if changed != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "the embedding batch thread keeps its priority"
            );
        }
    }
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
                let passages = model.passages(text, self.max_passages)?;
                let vectors = passages
                    .iter()
                    .map(|passage| {
                        single
                            .embed(&passage.ids, &passage.type_ids)
                            .map_err(|err| failed("inference", err))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(pool_passages(&passages, vectors))
            };
            // A batch too goes text by text through the packed forward, the texts spread over
            // the cores: each text computes only its own tokens (no padding to the longest), and
            // the packed half-precision weights beat candle's products at these sizes (the
            // embed_bench example: 148 sentences/s through candle's padded batches).
            return match texts {
                [text] => Ok(vec![embed_one(text)?]),
                _ => {
                    use rayon::prelude::*;
                    let batches = self.batches.get_or_init(|| {
                        rayon::ThreadPoolBuilder::new()
                            .thread_name(|index| format!("mnemo-embed-batch-{index}"))
                            .start_handler(|_| lower_this_threads_priority())
                            .build()
                            .map_err(|err| tracing::warn!("no pool for embedding batches: {err}"))
                            .ok()
                    });
                    match batches {
                        Some(pool) => pool.install(|| texts.par_iter().map(embed_one).collect()),
                        None => texts.par_iter().map(embed_one).collect(),
                    }
                }
            };
        }
        if let [_] = texts {
            let single = self.single.get_or_init(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(|_| "mnemo-embed-query".to_owned())
                    .build()
                    .map_err(|err| tracing::warn!("no single-thread pool for queries: {err}"))
                    .ok()
            });
            if let Some(pool) = single {
                return pool.install(|| self.embed_with_candle(&model, texts));
            }
        }
        self.embed_with_candle(&model, texts)
    }

    /// Without the fast path (a CPU without AVX2/FMA): candle's batches. Passages of similar
    /// lengths share a forward pass, so that little padding is computed.
    fn embed_with_candle(
        &self,
        model: &LoadedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let passages = texts
            .iter()
            .map(|text| model.passages(text, self.max_passages))
            .collect::<Result<Vec<_>, _>>()?;
        // (text, passage) of every passage, shortest first.
        let mut order: Vec<(usize, usize)> = passages
            .iter()
            .enumerate()
            .flat_map(|(text_idx, text)| (0..text.len()).map(move |idx| (text_idx, idx)))
            .collect();
        order.sort_by_key(|&(text_idx, idx)| passages[text_idx][idx].ids.len());
        let mut vectors: Vec<Vec<Vec<f32>>> = passages
            .iter()
            .map(|text| vec![Vec::new(); text.len()])
            .collect();
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&Passage> = chunk
                .iter()
                .map(|&(text_idx, idx)| &passages[text_idx][idx])
                .collect();
            let batch_vectors = model.embed_chunk(batch)?;
            for (&(text_idx, idx), vector) in chunk.iter().zip(batch_vectors) {
                vectors[text_idx][idx] = vector;
            }
        }
        Ok(passages
            .iter()
            .zip(vectors)
            .map(|(text, text_vectors)| pool_passages(text, text_vectors))
            .collect())
    }
}

/// One vector for a text from its passages' vectors: the mean weighted by each passage's
/// tokens, L2-normalised. A single passage's vector is returned unchanged.
fn pool_passages(passages: &[Passage], mut vectors: Vec<Vec<f32>>) -> Vec<f32> {
    if vectors.len() <= 1 {
        return vectors.pop().unwrap_or_default();
    }
    let mut pooled = vec![0.0_f32; vectors[0].len()];
    for (passage, vector) in passages.iter().zip(&vectors) {
        let weight = passage.ids.len() as f32;
        for (sum, value) in pooled.iter_mut().zip(vector) {
            *sum += weight * value;
        }
    }
    let norm = pooled.iter().map(|value| value * value).sum::<f32>().sqrt();
    if norm > 1e-12 {
        for value in &mut pooled {
            *value /= norm;
        }
    }
    pooled
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
    // The shipped tokenizer.json pads every input to 128 tokens and truncates at 128: the
    // tokenizer here does neither, `passages` cuts and `embed_chunk` pads. The packed forward
    // takes a single text without an attention mask, so a padding token there would be read
    // as text.
    let pad_id = tokenizer.get_padding().map_or(0, |padding| padding.pad_id);
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(None)
        .map_err(|err| invalid(&tokenizer_path, err.to_string()))?;
    let frame = Frame::of(&tokenizer).map_err(|err| invalid(&tokenizer_path, err))?;
    if max_len <= frame.len() {
        return Err(invalid(
            &tokenizer_path,
            format!(
                "max_seq_len {max_len} leaves no room for text between the tokenizer's {} \
                 special tokens",
                frame.len()
            ),
        ));
    }

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
        frame,
        pad_id,
        max_len,
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
    /// The passages the model reads of `text`, each framed by the special tokens: its first
    /// `max_len` tokens, then windows of the same size that start [`PASSAGE_OVERLAP`] tokens
    /// (at most half a window) before the last one ended, at most `max_passages` in all.
    fn passages(&self, text: &str, max_passages: usize) -> Result<Vec<Passage>, EmbeddingError> {
        let tokens = self
            .tokenizer
            .encode(text, false)
            .map_err(|err| failed("tokenizer", err))?;
        let tokens = tokens.get_ids();
        let window = self.max_len.saturating_sub(self.frame.len()).max(1);
        let step = window - PASSAGE_OVERLAP.min(window / 2);
        let mut passages = Vec::new();
        let mut start = 0;
        loop {
            let end = (start + window).min(tokens.len());
            passages.push(self.frame.around(&tokens[start..end]));
            if end == tokens.len() || passages.len() >= max_passages {
                return Ok(passages);
            }
            start += step;
        }
    }

    /// One forward pass over `passages` (padded here to the longest): run BERT, mean-pool over
    /// the attention mask, L2-normalise.
    fn embed_chunk(&self, passages: Vec<&Passage>) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let n_texts = passages.len();
        let n_tokens = passages
            .iter()
            .map(|passage| passage.ids.len())
            .max()
            .unwrap_or(0);
        let mut ids = Vec::with_capacity(n_texts * n_tokens);
        let mut type_ids = Vec::with_capacity(n_texts * n_tokens);
        let mut mask = Vec::with_capacity(n_texts * n_tokens);
        for passage in &passages {
            let padding = n_tokens - passage.ids.len();
            ids.extend_from_slice(&passage.ids);
            ids.extend(std::iter::repeat_n(self.pad_id, padding));
            type_ids.extend_from_slice(&passage.type_ids);
            type_ids.extend(std::iter::repeat_n(0, padding));
            mask.extend(std::iter::repeat_n(1_u32, passage.ids.len()));
            mask.extend(std::iter::repeat_n(0_u32, padding));
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

#[cfg(test)]
mod tests {
    //! Needs the model, as `tests/fidelity.rs` does (`scripts/fetch-model`).

    use super::*;

    fn cosine(left: &[f32], right: &[f32]) -> f32 {
        left.iter().zip(right).map(|(a, b)| a * b).sum()
    }

    #[test]
    fn candle_and_the_packed_forward_read_passages_alike() {
        let dir = std::env::var_os("MNEMO_MODEL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| EmbeddingConfig::default().resolved_model_dir());
        // Passages of 64 tokens, 4 per forward pass: a long text fills several batches.
        let embedder = LocalEmbedder::new(&dir, 64, 4);
        let model = embedder
            .inner
            .model()
            .expect("the model is installed (scripts/fetch-model)");
        let long = "We walked along the river to the old mill, then back through the \
                    orchard where the apples were already falling. "
            .repeat(20);
        let passages = model
            .passages(&long, DEFAULT_MAX_PASSAGES)
            .expect("passages");
        assert_eq!(passages.len(), DEFAULT_MAX_PASSAGES, "capped");
        assert!(passages.iter().all(|passage| passage.ids.len() == 64));
        // Passages overlap, and each is framed as the tokenizer frames a text.
        let whole = model.tokenizer.encode(long.as_str(), true).expect("encode");
        let (first, second) = (&passages[0].ids, &passages[1].ids);
        assert_eq!(
            first[..63],
            whole.get_ids()[..63],
            "[CLS] and the first tokens"
        );
        assert_eq!(second[0], first[0], "[CLS] again");
        assert_eq!(first.last(), whole.get_ids().last(), "[SEP]");
        assert_eq!(second.last(), whole.get_ids().last(), "[SEP]");
        assert_eq!(
            second[1..32],
            first[32..63],
            "the second repeats the first's last 31"
        );

        let texts = vec!["A short one.".to_owned(), long];
        let candle = embedder
            .inner
            .embed_with_candle(&model, &texts)
            .expect("candle's batches");
        let packed = embedder.inner.embed_blocking(&texts).expect("packed");
        if model.single.is_none() {
            eprintln!("this CPU lacks AVX2, FMA or F16C: both paths are candle's");
        }
        for (text, (a, b)) in texts.iter().zip(candle.iter().zip(&packed)) {
            let norm = a.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{text:?}: norm {norm}");
            let similarity = cosine(a, b);
            assert!(similarity > 0.9999, "{text:?}: cosine {similarity}");
        }
    }
}
