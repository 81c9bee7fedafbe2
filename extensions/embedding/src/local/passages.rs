//! Reading a text as passages: the special tokens the tokenizer frames a text with, the
//! overlapping windows a long text is cut into, and the pooling of their vectors into one.

use tokenizers::Tokenizer;

use super::{failed, LoadedModel, PASSAGE_OVERLAP};
use mnemo_embedding_api::EmbeddingError;

/// What the model reads of a text at once: token and token-type ids, special tokens included.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Passage {
    pub(super) ids: Vec<u32>,
    pub(super) type_ids: Vec<u32>,
}

/// The special tokens (`[CLS]` before and `[SEP]` after, for BERT) and token types the
/// tokenizer's template puts around a single text, learnt by encoding one word.
#[derive(Debug, Clone)]
pub(super) struct Frame {
    before: Vec<(u32, u32)>,
    after: Vec<(u32, u32)>,
    text_type_id: u32,
}

impl Frame {
    pub(super) fn of(tokenizer: &Tokenizer) -> Result<Self, String> {
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

    pub(super) fn len(&self) -> usize {
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

impl LoadedModel {
    /// The passages the model reads of `text`, each framed by the special tokens: its first
    /// `max_len` tokens, then windows of the same size that start [`PASSAGE_OVERLAP`] tokens
    /// (at most half a window) before the last one ended, at most `max_passages` in all.
    pub(super) fn passages(
        &self,
        text: &str,
        max_passages: usize,
    ) -> Result<Vec<Passage>, EmbeddingError> {
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
}

/// One vector for a text from its passages' vectors: the mean weighted by each passage's
/// tokens, L2-normalised. A single passage's vector is returned unchanged.
pub(super) fn pool_passages(passages: &[Passage], mut vectors: Vec<Vec<f32>>) -> Vec<f32> {
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
