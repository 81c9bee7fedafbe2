//! Loading the local model: its files, the tokenizer set to neither truncate nor pad, and the
//! weights memory-mapped, once per provider and never panicking through to the caller.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use tokenizers::Tokenizer;

use super::passages::Frame;
use super::{Inner, LoadedModel, CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE};
use crate::config::{expand_tilde, DEFAULT_MODEL_DIR};
use crate::single::SingleTextBert;

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

impl Inner {
    pub(super) fn model(&self) -> Result<Arc<LoadedModel>, String> {
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
