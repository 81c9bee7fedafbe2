//! One text through a BERT encoder on the CPU's AVX2/FMA units: the search path's query embedding.
//!
//! candle's matrix product packs its operands on every call. A ten-token query multiplies ten
//! rows by 384×384 and 384×1536 weight matrices, so packing the weights cost more than the
//! multiplication: about half of a 12 ms query embedding. Here the weights are packed once at
//! load (half precision, which halves the bytes each product streams; query, key and value
//! fused into one matrix), and each product reads them once, in AVX-512 where the CPU has it
//! and AVX2 otherwise: 4.3–4.8 ms per short query with AVX-512 and 6.3–7.3 ms with AVX2 on the
//! CI machine, against 12 ms with candle.
//!
//! Batches (the background indexer, imports) go through it too, one text at a time on each
//! core: a text computes only its own tokens, where candle's batches pad every text to the
//! longest. candle's path remains for CPUs without AVX2/FMA. Both must agree with the reference
//! vectors: `tests/fidelity.rs`.

use candle_core::DType;
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{Config, HiddenAct, PositionEmbeddingType};
use half::f16;

/// A linear layer `y = x·Wᵀ + b`, its weights in half precision and packed in panels (see
/// [`kernel::pack`]).
struct Linear {
    packed: Vec<f16>,
    bias: Vec<f32>,
    in_dim: usize,
    out_dim: usize,
}

/// Layer normalisation over the hidden size.
struct LayerNorm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

struct EncoderLayer {
    /// Query, key and value in one product: output `[q | k | v]`.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// A BERT encoder for one text at a time, mean-pooled and L2-normalised like the batch path.
pub(crate) struct SingleTextBert {
    hidden: usize,
    heads: usize,
    activation: HiddenAct,
    /// `vocab × hidden`, half precision.
    word: Vec<f16>,
    /// `max_positions × hidden`.
    position: Vec<f32>,
    /// `type_vocab × hidden`.
    token_type: Vec<f32>,
    embedding_norm: LayerNorm,
    layers: Vec<EncoderLayer>,
}

/// Whether this CPU runs the fast path: AVX2 and FMA for the products, F16C to widen the
/// half-precision weights.
pub(crate) fn cpu_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl SingleTextBert {
    /// The encoder `vb` holds, or `None` when this CPU or this model is not one the fast path
    /// handles (the caller then uses candle for single texts too). An error means the weights
    /// are not the BERT model `config` describes.
    pub(crate) fn load(vb: &VarBuilder, config: &Config) -> Result<Option<Self>, String> {
        if !cpu_supported()
            || config.position_embedding_type != PositionEmbeddingType::Absolute
            || config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            return Ok(None);
        }
        let vb = model_root(vb, config);
        let hidden = config.hidden_size;
        let eps = config.layer_norm_eps as f32;
        let embeddings = vb.pp("embeddings");
        let word = tensor(
            &embeddings,
            (config.vocab_size, hidden),
            "word_embeddings.weight",
        )?;
        let position = tensor(
            &embeddings,
            (config.max_position_embeddings, hidden),
            "position_embeddings.weight",
        )?;
        let token_type = tensor(
            &embeddings,
            (config.type_vocab_size, hidden),
            "token_type_embeddings.weight",
        )?;
        let embedding_norm = layer_norm(&embeddings.pp("LayerNorm"), hidden, eps)?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for index in 0..config.num_hidden_layers {
            let layer = vb.pp(format!("encoder.layer.{index}"));
            let attention = layer.pp("attention");
            let qkv = Linear::fused(
                &[
                    &attention.pp("self.query"),
                    &attention.pp("self.key"),
                    &attention.pp("self.value"),
                ],
                hidden,
                hidden,
            )?;
            layers.push(EncoderLayer {
                qkv,
                attention_out: Linear::fused(&[&attention.pp("output.dense")], hidden, hidden)?,
                attention_norm: layer_norm(&attention.pp("output.LayerNorm"), hidden, eps)?,
                intermediate: Linear::fused(
                    &[&layer.pp("intermediate.dense")],
                    hidden,
                    config.intermediate_size,
                )?,
                output: Linear::fused(
                    &[&layer.pp("output.dense")],
                    config.intermediate_size,
                    hidden,
                )?,
                output_norm: layer_norm(&layer.pp("output.LayerNorm"), hidden, eps)?,
            });
        }
        Ok(Some(Self {
            hidden,
            heads: config.num_attention_heads,
            activation: config.hidden_act,
            word: word.iter().map(|&value| f16::from_f32(value)).collect(),
            position,
            token_type,
            embedding_norm,
            layers,
        }))
    }

    /// The sentence vector of one tokenised text: mean over every token of the last hidden
    /// state, L2-normalised. `ids` and `type_ids` have the same length, at most the model's
    /// position count (the tokenizer truncates).
    pub(crate) fn embed(&self, ids: &[u32], type_ids: &[u32]) -> Result<Vec<f32>, String> {
        let hidden = self.hidden;
        let n_tokens = ids.len();
        if n_tokens == 0 || type_ids.len() != n_tokens || n_tokens * hidden > self.position.len() {
            return Err(format!(
                "{n_tokens} tokens do not fit the model's {} positions",
                self.position.len() / hidden
            ));
        }
        let mut states = vec![0.0f32; n_tokens * hidden];
        for (token, row) in states.chunks_exact_mut(hidden).enumerate() {
            let word = ids[token] as usize;
            let kind = type_ids[token] as usize;
            let (Some(word), Some(kind)) = (
                self.word.get(word * hidden..(word + 1) * hidden),
                self.token_type.get(kind * hidden..(kind + 1) * hidden),
            ) else {
                return Err(format!(
                    "token id {word} or type {kind} is outside the model"
                ));
            };
            let position = &self.position[token * hidden..(token + 1) * hidden];
            for (dim, value) in row.iter_mut().enumerate() {
                *value = word[dim].to_f32() + kind[dim] + position[dim];
            }
        }
        self.embedding_norm.apply(&mut states);

        let mut qkv = Vec::new();
        let mut context = vec![0.0f32; n_tokens * hidden];
        let mut projected = Vec::new();
        let mut intermediate = Vec::new();
        for layer in &self.layers {
            layer.qkv.forward(&states, &mut qkv);
            self.attend(&qkv, n_tokens, &mut context);
            layer.attention_out.forward(&context, &mut projected);
            add_in_place(&mut states, &projected);
            layer.attention_norm.apply(&mut states);

            layer.intermediate.forward(&states, &mut intermediate);
            activate(self.activation, &mut intermediate);
            layer.output.forward(&intermediate, &mut projected);
            add_in_place(&mut states, &projected);
            layer.output_norm.apply(&mut states);
        }

        let mut pooled = vec![0.0f32; hidden];
        for row in states.chunks_exact(hidden) {
            add_in_place(&mut pooled, row);
        }
        let norm = (pooled.iter().map(|value| value * value).sum::<f32>()).sqrt();
        // The mean's divisor cancels in the normalisation; the floor matches the batch path's.
        let divisor = (norm / n_tokens as f32).max(1e-12) * n_tokens as f32;
        pooled.iter_mut().for_each(|value| *value /= divisor);
        Ok(pooled)
    }

    /// Scaled dot-product attention of every head over all tokens (one text: no padding mask).
    /// `qkv` holds each token's `[q | k | v]` row; the heads' outputs go side by side in
    /// `context`.
    fn attend(&self, qkv: &[f32], n_tokens: usize, context: &mut [f32]) {
        let hidden = self.hidden;
        let head_dim = hidden / self.heads;
        let scale = 1.0 / (head_dim as f32).sqrt();
        let mut scores = vec![0.0f32; n_tokens];
        for head in 0..self.heads {
            let offset = head * head_dim;
            for query_token in 0..n_tokens {
                let query = &qkv[query_token * 3 * hidden + offset..][..head_dim];
                for (key_token, score) in scores.iter_mut().enumerate() {
                    let key = &qkv[key_token * 3 * hidden + hidden + offset..][..head_dim];
                    *score = dot(query, key) * scale;
                }
                softmax(&mut scores);
                let out = &mut context[query_token * hidden + offset..][..head_dim];
                out.fill(0.0);
                for (value_token, &weight) in scores.iter().enumerate() {
                    let value = &qkv[value_token * 3 * hidden + 2 * hidden + offset..][..head_dim];
                    for (out, value) in out.iter_mut().zip(value) {
                        *out += weight * value;
                    }
                }
            }
        }
    }
}

impl Linear {
    /// The linear layers in `parts` (each `out_dim × in_dim`, with bias) stacked into one:
    /// their outputs come side by side.
    fn fused(parts: &[&VarBuilder], in_dim: usize, out_dim: usize) -> Result<Self, String> {
        let mut weight = Vec::with_capacity(parts.len() * out_dim * in_dim);
        let mut bias = Vec::with_capacity(parts.len() * out_dim);
        for part in parts {
            weight.extend(tensor(part, (out_dim, in_dim), "weight")?);
            bias.extend(tensor(part, out_dim, "bias")?);
        }
        let out_dim = parts.len() * out_dim;
        Ok(Self {
            packed: kernel::pack(&weight, in_dim, out_dim),
            bias,
            in_dim,
            out_dim,
        })
    }

    /// `output = input·Wᵀ + b` for every row of `input` (`n × in_dim`); `output` is resized to
    /// `n × out_dim`.
    fn forward(&self, input: &[f32], output: &mut Vec<f32>) {
        let n_rows = input.len() / self.in_dim;
        output.clear();
        output.resize(n_rows * self.out_dim, 0.0);
        kernel::linear(
            kernel::best_path(),
            input,
            &self.packed,
            &self.bias,
            self.in_dim,
            self.out_dim,
            output,
        );
    }
}

impl LayerNorm {
    /// Normalises each row of `rows` in place.
    fn apply(&self, rows: &mut [f32]) {
        let width = self.gamma.len();
        for row in rows.chunks_exact_mut(width) {
            let mean = row.iter().sum::<f32>() / width as f32;
            let variance = row
                .iter()
                .map(|value| (value - mean) * (value - mean))
                .sum::<f32>()
                / width as f32;
            let inverse = 1.0 / (variance + self.eps).sqrt();
            for ((value, gamma), beta) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *value = (*value - mean) * inverse * gamma + beta;
            }
        }
    }
}

/// The sub-tree of `vb` holding `embeddings.*` and `encoder.*`: the root, `bert.`, or the
/// model type's prefix, as candle's `BertModel::load` looks for them.
fn model_root<'a>(vb: &VarBuilder<'a>, config: &Config) -> VarBuilder<'a> {
    let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
        vb.pp("bert")
    } else {
        vb.clone()
    };
    match &config.model_type {
        Some(model_type)
            if !vb.contains_tensor("embeddings.word_embeddings.weight")
                && vb.contains_tensor(&format!(
                    "{model_type}.embeddings.word_embeddings.weight"
                )) =>
        {
            vb.pp(model_type)
        }
        _ => vb,
    }
}

/// The f32 values of tensor `name` under `vb`, which must have `shape`.
fn tensor<S: Into<candle_core::Shape>>(
    vb: &VarBuilder,
    shape: S,
    name: &str,
) -> Result<Vec<f32>, String> {
    vb.get(shape, name)
        .and_then(|tensor| tensor.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>())
        .map_err(|err| format!("{}.{name}: {err}", vb.prefix()))
}

/// A layer norm's scale and shift under `vb` (`weight`/`bias`, or the older `gamma`/`beta`).
fn layer_norm(vb: &VarBuilder, width: usize, eps: f32) -> Result<LayerNorm, String> {
    let pick = |names: [&'static str; 2]| {
        names
            .into_iter()
            .find(|name| vb.contains_tensor(name))
            .unwrap_or(names[0])
    };
    Ok(LayerNorm {
        gamma: tensor(vb, width, pick(["weight", "gamma"]))?,
        beta: tensor(vb, width, pick(["bias", "beta"]))?,
        eps,
    })
}

fn add_in_place(target: &mut [f32], addend: &[f32]) {
    for (target, addend) in target.iter_mut().zip(addend) {
        *target += addend;
    }
}

fn dot(left: &[f32], right: &[f32]) -> f32 {
    left.iter()
        .zip(right)
        .map(|(left, right)| left * right)
        .sum()
}

fn softmax(values: &mut [f32]) {
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0.0;
    for value in values.iter_mut() {
        *value = (*value - max).exp();
        total += *value;
    }
    values.iter_mut().for_each(|value| *value /= total);
}

/// The hidden activation, as candle's BERT applies it (`gelu` is the exact, erf-based one).
fn activate(activation: HiddenAct, values: &mut [f32]) {
    match activation {
        HiddenAct::Gelu => values.iter_mut().for_each(|value| {
            *value = 0.5
                * *value
                * (1.0 + candle_core::cpu::erf::erf_f32(*value * std::f32::consts::FRAC_1_SQRT_2));
        }),
        HiddenAct::GeluApproximate => values.iter_mut().for_each(|value| {
            let x = *value;
            let inner = 0.797_884_6 * (x + 0.044_715 * x * x * x);
            *value = 0.5 * x * (1.0 + inner.tanh());
        }),
        HiddenAct::Relu => values.iter_mut().for_each(|value| *value = value.max(0.0)),
    }
}

/// The matrix product, in AVX2/FMA/F16C intrinsics. Only reached after [`cpu_supported`].
#[allow(unsafe_code)]
mod kernel {
    use half::f16;

    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    /// Output columns per panel: three AVX-512 registers of sixteen, or two AVX2 tiles of
    /// three registers of eight.
    const PANEL: usize = 48;
    /// A panel's columns one AVX2 tile covers.
    const HALF: usize = PANEL / 2;

    /// Which instructions a product uses.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Path {
        /// Tiles of 4 tokens × 24 columns: twelve accumulators, which with three weight
        /// registers and one broadcast input fill the sixteen AVX2 registers. Each input
        /// position costs 3 weight loads and 4 broadcasts for 12 multiply-adds.
        Avx2,
        /// Tiles of 8 tokens × 48 columns in the 32 AVX-512 registers: 3 weight loads and 8
        /// broadcasts for 24 multiply-adds of sixteen lanes.
        Avx512,
    }

    /// The fastest path this CPU runs (the caller has checked [`super::cpu_supported`]).
    pub(super) fn best_path() -> Path {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Path::Avx512;
        }
        Path::Avx2
    }

    /// `weight` (`out_dim` rows of `in_dim`) in half precision, laid out as the product reads
    /// it: panel by panel of [`PANEL`] outputs, and within a panel input position by input
    /// position, the panel's outputs side by side. The last panel is padded with zeros.
    pub(super) fn pack(weight: &[f32], in_dim: usize, out_dim: usize) -> Vec<f16> {
        let mut packed = vec![f16::ZERO; out_dim.div_ceil(PANEL) * in_dim * PANEL];
        for (out, row) in weight.chunks_exact(in_dim).enumerate().take(out_dim) {
            let (panel, column) = (out / PANEL, out % PANEL);
            for (k, &value) in row.iter().enumerate() {
                packed[(panel * in_dim + k) * PANEL + column] = f16::from_f32(value);
            }
        }
        packed
    }

    /// `output[r][o] = bias[o] + Σₖ input[r][k]·W[o][k]` for every row `r`, with `W` as
    /// [`pack`] laid it out.
    pub(super) fn linear(
        path: Path,
        input: &[f32],
        packed: &[f16],
        bias: &[f32],
        in_dim: usize,
        out_dim: usize,
        output: &mut [f32],
    ) {
        assert!(in_dim > 0 && packed.len() == out_dim.div_ceil(PANEL) * in_dim * PANEL);
        assert!(bias.len() == out_dim && input.len().is_multiple_of(in_dim));
        assert!(output.len() == input.len() / in_dim * out_dim);
        #[cfg(target_arch = "x86_64")]
        {
            assert!(
                super::cpu_supported(),
                "the single-text path needs AVX2, FMA and F16C"
            );
            assert!(
                path == Path::Avx2 || std::arch::is_x86_feature_detected!("avx512f"),
                "the AVX-512 path needs AVX-512F"
            );
            let mut matrix = Matrix {
                input,
                packed,
                bias,
                in_dim,
                out_dim,
                output,
            };
            // SAFETY: the CPU has the features the path enables (checked just above), and the
            // lengths it relies on were asserted above.
            unsafe {
                match path {
                    Path::Avx2 => matrix.product_avx2(),
                    Path::Avx512 => matrix.product_avx512(),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("the single-text path is only built on x86_64");
    }

    /// The operands of one product, with the lengths `linear` asserted.
    struct Matrix<'a> {
        input: &'a [f32],
        packed: &'a [f16],
        bias: &'a [f32],
        in_dim: usize,
        out_dim: usize,
        output: &'a mut [f32],
    }

    #[cfg(target_arch = "x86_64")]
    impl Matrix<'_> {
        /// # Safety
        /// The CPU has AVX2, FMA and F16C; the lengths are those `linear` asserts.
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn product_avx2(&mut self) {
            let n_rows = self.input.len() / self.in_dim;
            // Panels outermost: a panel's weights are read from memory once and from cache
            // for every further tile of tokens.
            for half in 0..self.out_dim.div_ceil(HALF) {
                let mut row = 0;
                while row < n_rows {
                    let rows = 4.min(n_rows - row);
                    // SAFETY: `row + rows <= n_rows` and `half` is in a panel of `packed`.
                    unsafe {
                        match rows {
                            4 => self.tile_avx2::<4>(half, row),
                            3 => self.tile_avx2::<3>(half, row),
                            2 => self.tile_avx2::<2>(half, row),
                            _ => self.tile_avx2::<1>(half, row),
                        }
                    }
                    row += rows;
                }
            }
        }

        /// # Safety
        /// The CPU has AVX-512F, AVX2, FMA and F16C; the lengths are those `linear` asserts.
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn product_avx512(&mut self) {
            let n_rows = self.input.len() / self.in_dim;
            for panel in 0..self.out_dim.div_ceil(PANEL) {
                let mut row = 0;
                while row < n_rows {
                    let rows = 8.min(n_rows - row);
                    // SAFETY: `row + rows <= n_rows` and `panel` is a panel of `packed`.
                    unsafe {
                        match rows {
                            8 => self.tile_avx512::<8>(panel, row),
                            7 => self.tile_avx512::<7>(panel, row),
                            6 => self.tile_avx512::<6>(panel, row),
                            5 => self.tile_avx512::<5>(panel, row),
                            4 => self.tile_avx512::<4>(panel, row),
                            3 => self.tile_avx512::<3>(panel, row),
                            2 => self.tile_avx512::<2>(panel, row),
                            _ => self.tile_avx512::<1>(panel, row),
                        }
                    }
                    row += rows;
                }
            }
        }

        /// Output rows `row..row + R` of one panel's columns.
        ///
        /// # Safety
        /// As [`Self::product_avx512`], and `row + R` is at most the number of input rows.
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn tile_avx512<const R: usize>(&mut self, panel: usize, row: usize) {
            let in_dim = self.in_dim;
            let weights = self.packed[panel * in_dim * PANEL..][..in_dim * PANEL].as_ptr();
            let inputs = self.input[row * in_dim..][..R * in_dim].as_ptr();
            let mut acc = [[_mm512_setzero_ps(); 3]; R];
            for k in 0..in_dim {
                // SAFETY: the panel slice holds `in_dim * PANEL` weights and the input slice
                // `R * in_dim` values (both bounds-checked when taken above); `k < in_dim`.
                let (w0, w1, w2) = unsafe {
                    let at = weights.add(k * PANEL);
                    (
                        _mm512_cvtph_ps(_mm256_loadu_si256(at.cast())),
                        _mm512_cvtph_ps(_mm256_loadu_si256(at.add(16).cast())),
                        _mm512_cvtph_ps(_mm256_loadu_si256(at.add(32).cast())),
                    )
                };
                for (lane, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: as above, `lane < R`.
                    let input = _mm512_set1_ps(unsafe { *inputs.add(lane * in_dim + k) });
                    acc[0] = _mm512_fmadd_ps(input, w0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(input, w1, acc[1]);
                    acc[2] = _mm512_fmadd_ps(input, w2, acc[2]);
                }
            }
            let first = panel * PANEL;
            let columns = PANEL.min(self.out_dim - first);
            for (lane, acc) in acc.iter().enumerate() {
                let mut sums = [0.0f32; PANEL];
                for (part, acc) in acc.iter().enumerate() {
                    // SAFETY: `sums` holds three registers' worth of f32.
                    unsafe { _mm512_storeu_ps(sums.as_mut_ptr().add(part * 16), *acc) };
                }
                self.store(row + lane, first, &sums[..columns]);
            }
        }

        /// One output row's `sums` from column `first` on, plus the bias.
        fn store(&mut self, row: usize, first: usize, sums: &[f32]) {
            let out_row = &mut self.output[row * self.out_dim + first..][..sums.len()];
            for ((out, sum), bias) in out_row.iter_mut().zip(sums).zip(&self.bias[first..]) {
                *out = sum + bias;
            }
        }

        /// Output rows `row..row + R` of one half-panel's columns (`half` counts half-panels).
        ///
        /// # Safety
        /// As [`Self::product_avx2`], and `row + R` is at most the number of input rows.
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn tile_avx2<const R: usize>(&mut self, half: usize, row: usize) {
            let in_dim = self.in_dim;
            let (panel, offset) = (half / 2, (half % 2) * HALF);
            let weights = self.packed[panel * in_dim * PANEL..][..in_dim * PANEL].as_ptr();
            let inputs = self.input[row * in_dim..][..R * in_dim].as_ptr();
            let mut acc = [[_mm256_setzero_ps(); 3]; R];
            for k in 0..in_dim {
                // SAFETY: the panel slice holds `in_dim * PANEL` weights and the input slice
                // `R * in_dim` values (both bounds-checked when taken above); `k < in_dim` and
                // `offset + 24 <= PANEL`.
                let (w0, w1, w2) = unsafe {
                    let at = weights.add(k * PANEL + offset);
                    (
                        _mm256_cvtph_ps(_mm_loadu_si128(at.cast())),
                        _mm256_cvtph_ps(_mm_loadu_si128(at.add(8).cast())),
                        _mm256_cvtph_ps(_mm_loadu_si128(at.add(16).cast())),
                    )
                };
                for (lane, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: as above, `lane < R`.
                    let input = _mm256_set1_ps(unsafe { *inputs.add(lane * in_dim + k) });
                    acc[0] = _mm256_fmadd_ps(input, w0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(input, w1, acc[1]);
                    acc[2] = _mm256_fmadd_ps(input, w2, acc[2]);
                }
            }
            let first = half * HALF;
            if first >= self.out_dim {
                return;
            }
            let columns = HALF.min(self.out_dim - first);
            for (lane, acc) in acc.iter().enumerate() {
                let mut sums = [0.0f32; HALF];
                for (part, acc) in acc.iter().enumerate() {
                    // SAFETY: `sums` holds three registers' worth of f32.
                    unsafe { _mm256_storeu_ps(sums.as_mut_ptr().add(part * 8), *acc) };
                }
                self.store(row + lane, first, &sums[..columns]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::kernel::{self, Path};
    use half::f16;

    /// Deterministic values in [-1, 1).
    fn values(count: usize, seed: u64) -> Vec<f32> {
        let mut state = seed | 1;
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn every_product_path_matches_a_plain_product() {
        if !super::cpu_supported() {
            eprintln!("skipped: this CPU lacks AVX2, FMA or F16C, so the path is never taken");
            return;
        }
        let mut paths = vec![Path::Avx2];
        if kernel::best_path() == Path::Avx512 {
            paths.push(Path::Avx512);
        }
        // Shapes with ragged panels and token tiles, and the model's own.
        for (rows, in_dim, out_dim) in [
            (1, 8, 5),
            (3, 16, 48),
            (9, 40, 100),
            (13, 384, 1152),
            (7, 1536, 384),
        ] {
            let weight = values(out_dim * in_dim, 7 + in_dim as u64);
            let input = values(rows * in_dim, 11 + out_dim as u64);
            let bias = values(out_dim, 13);
            let packed = kernel::pack(&weight, in_dim, out_dim);
            for &path in &paths {
                let mut output = vec![0.0f32; rows * out_dim];
                kernel::linear(path, &input, &packed, &bias, in_dim, out_dim, &mut output);
                for row in 0..rows {
                    for out in 0..out_dim {
                        let expected = f64::from(bias[out])
                            + (0..in_dim)
                                .map(|k| {
                                    f64::from(input[row * in_dim + k])
                                        * f64::from(
                                            f16::from_f32(weight[out * in_dim + k]).to_f32(),
                                        )
                                })
                                .sum::<f64>();
                        let got = f64::from(output[row * out_dim + out]);
                        assert!(
                            (got - expected).abs() < 1e-4 * in_dim as f64,
                            "{path:?} {rows}x{in_dim}x{out_dim} [{row}][{out}]: {got} vs {expected}"
                        );
                    }
                }
            }
        }
    }
}
