//! The forward pass: a text at a time through the packed forward where the CPU has it, batches
//! spread over low-priority threads, and candle's padded batches where it has not.

use candle_core::{DType, Device, Tensor};

use super::passages::{pool_passages, Passage};
use super::{failed, Inner, LoadedModel, BATCH_NICENESS};
use mnemo_embedding_api::EmbeddingError;

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

impl Inner {
    pub(super) fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
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

impl LoadedModel {
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

#[cfg(test)]
mod tests {
    //! Needs the model, as `tests/it/embedding/fidelity.rs` does (`scripts/fetch-model`).

    use std::path::PathBuf;

    use crate::config::{EmbeddingConfig, DEFAULT_MAX_PASSAGES};
    use crate::local::LocalEmbedder;

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
