//! One text through a BERT encoder on the CPU's AVX2/FMA units: the search path's query embedding.
//!
//! candle's matrix product packs its operands on every call. A ten-token query multiplies ten
//! rows by 384×384 and 384×1536 weight matrices, so packing the weights cost more than the
//! multiplication: about half of a 12 ms query embedding. Here the weights are packed once at
//! load (half precision, which halves the bytes each product streams; query, key and value
//! fused into one matrix), and each product reads them once, in AVX-512 where the CPU has it
//! and AVX2 otherwise: 4.3–4.8 ms per short query with AVX-512 and 6.3–7.3 ms with AVX2 on the
//! CI machine, against 12 ms with candle. Two more products do twice `vfmadd231ps`'s
//! multiply-adds per instruction ([`Precision`]): on CPUs with AVX512-FP16 (Sapphire Rapids and
//! later), half-precision weights times inputs rounded to half precision by `vfmadd231ph`
//! (`single/gemm_fp16.rs`; lowest cosine 0.99999 with sentence-transformers); on CPUs with
//! AVX512_BF16, bfloat16 weights and inputs by `vdpbf16ps` (`single/gemm_bf16.rs`; 0.99994).
//! On CPUs with AMX (Sapphire Rapids and later, where Linux grants the tiles), bfloat16 tiles
//! multiplied by `tdpbf16ps` (`single/gemm_amx.rs`; 0.99994), several times faster again.
//! Half precision widened to f32 stays closest (0.9999993). A CPU flag does not promise a rate
//! (the CI machine's `vdpbf16ps` ran at a sixth of its earlier rate on 2026-11-27), so the first
//! load times every product the CPU has and keeps the fastest (`single/calibration.rs`).
//!
//! Attention (`single/attention.rs`), GELU (`single/activation.rs`) and layer norm
//! (`single/norm.rs`) run in AVX-512 where the CPU has it; in scalar code attention and GELU
//! took about 70% of a 200-token text. [`Kernels`] says which of these a forward uses, and the
//! tests run every set this CPU has against the reference (`single/tests.rs`).
//!
//! Batches (the background indexer, imports) go through it too, one text at a time on each
//! core: a text computes only its own tokens, where candle's batches pad every text to the
//! longest. candle's path remains for CPUs without AVX2/FMA. Both must agree with the reference
//! vectors: `tests/it/embedding/fidelity.rs`.

use candle_core::DType;
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{Config, HiddenAct, PositionEmbeddingType};
use half::f16;

/// Calls `$matrix.$tile::<R>(panel, row)` for every panel below `$panels` and every tile of
/// at most eight token rows below `$n_rows`, `R` being the tile's row count: the AVX-512
/// products take it as a constant, so that their accumulators stay in registers. Panels
/// outermost: a panel's weights are read from memory once and from cache for every further
/// tile of tokens. Expands to unsafe calls: the caller's own conditions must be those of `$tile`, with `row + R` at most
/// `$n_rows` and `panel` below `$panels` (which this loop keeps).
macro_rules! for_each_tile {
    ($matrix:expr, $tile:ident, $panels:expr, $n_rows:expr) => {{
        let n_rows: usize = $n_rows;
        for panel in 0..$panels {
            let mut row = 0;
            while row < n_rows {
                let rows = 8.min(n_rows - row);
                // SAFETY: `row + rows <= n_rows` and `panel` is below the panel count; the
                // rest is the caller's (see the macro's comment).
                unsafe {
                    match rows {
                        8 => $matrix.$tile::<8>(panel, row),
                        7 => $matrix.$tile::<7>(panel, row),
                        6 => $matrix.$tile::<6>(panel, row),
                        5 => $matrix.$tile::<5>(panel, row),
                        4 => $matrix.$tile::<4>(panel, row),
                        3 => $matrix.$tile::<3>(panel, row),
                        2 => $matrix.$tile::<2>(panel, row),
                        _ => $matrix.$tile::<1>(panel, row),
                    }
                }
                row += rows;
            }
        }
    }};
}

/// GELU and the softmax's `exp`, in AVX-512 where the CPU has it.
#[allow(unsafe_code)]
mod activation;
/// Attention, in AVX-512 register tiles where the CPU has it.
#[allow(unsafe_code)]
mod attention;
/// Which of the products this CPU runs fastest.
mod calibration;
/// The matrix product, in AVX2/FMA/F16C or AVX-512 intrinsics. Only reached after
/// [`cpu_supported`].
#[allow(unsafe_code)]
mod gemm;
/// The matrix product on AMX tiles, in bfloat16.
#[allow(unsafe_code)]
mod gemm_amx;
/// The matrix product in AVX-512 BF16.
#[allow(unsafe_code)]
mod gemm_bf16;
/// The matrix product in AVX512-FP16 arithmetic.
#[allow(unsafe_code)]
mod gemm_fp16;
/// Layer normalisation after the residual connection, in AVX-512 where the CPU has it.
#[allow(unsafe_code)]
mod norm;

use norm::LayerNorm;

/// A linear layer `y = x·Wᵀ + b`, its weights packed in panels.
struct Linear {
    packed: Packed,
    bias: Vec<f32>,
    in_dim: usize,
    out_dim: usize,
}

/// A linear layer's weights as its product reads them.
enum Packed {
    /// Half precision, widened to f32 for FMA (see [`gemm::pack`]), in AVX2 or AVX-512.
    Half(Vec<f16>, gemm::Path),
    /// bfloat16, multiplied with inputs rounded to bfloat16 by `vdpbf16ps` (see
    /// [`gemm_bf16::pack`]).
    Brain(Vec<half::bf16>),
    /// Half precision, multiplied with inputs rounded to half precision by `vfmadd231ph`
    /// (see [`gemm_fp16::pack`]).
    NativeHalf(gemm_fp16::PackedHalf),
    /// bfloat16 in tiles, multiplied with inputs rounded to bfloat16 by `tdpbf16ps` (see
    /// [`gemm_amx::pack`]).
    Tiles(gemm_amx::PackedTiles),
}

/// How the linear layers multiply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Precision {
    /// Half-precision weights, f32 inputs and products: AVX2 or AVX-512.
    Half,
    /// bfloat16 weights and inputs, f32 sums: AVX512_BF16.
    Brain,
    /// Half-precision weights, inputs and products, summed in half precision over short runs
    /// and in f32 beyond: AVX512-FP16.
    NativeHalf,
    /// bfloat16 weights and inputs, f32 sums, on AMX tiles: AMX-BF16, where Linux grants the
    /// tiles.
    Tiles,
}

impl Precision {
    /// Whether this CPU runs the products.
    pub(crate) fn available(self) -> bool {
        match self {
            Self::Half => cpu_supported(),
            Self::Brain => cpu_supported() && gemm_bf16::available(),
            Self::NativeHalf => cpu_supported() && gemm_fp16::available(),
            Self::Tiles => cpu_supported() && gemm_amx::available(),
        }
    }
}

/// Which instructions the forward pass uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kernels {
    /// How the linear layers multiply.
    pub(crate) precision: Precision,
    /// Whether half-precision products, attention, GELU and layer norm use AVX-512 where the CPU
    /// has it. Without it the forward runs as on a CPU with AVX2 only, the products that need
    /// AVX-512 excepted (tests compare the two).
    pub(crate) avx512: bool,
}

impl Kernels {
    /// The fastest this CPU runs: the products that measured fastest here among those it has
    /// ([`calibration`]), AVX-512 for the rest where it has AVX-512F.
    pub(crate) fn best() -> Self {
        Self {
            precision: calibration::fastest_precision(),
            avx512: true,
        }
    }
}

/// The buffers of one forward pass, kept by each thread from text to text: a 256-token text
/// needs about 5 MB of them, and allocating them afresh for every text cost page faults and
/// page clearing (6% of the time on long texts). They grow to the longest text a thread has
/// embedded and live as long as the thread: rayon's (batches) for the process, tokio's
/// blocking threads (single texts, mostly short queries) until they idle out.
#[derive(Default)]
struct Workspace {
    states: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    intermediate: Vec<f32>,
    rounded: RoundedInputs,
    attention: attention::Scratch,
}

/// A product's inputs, rounded for the products that multiply in bfloat16 or half precision.
#[derive(Default)]
struct RoundedInputs {
    brain: Vec<half::bf16>,
    native_half: gemm_fp16::Rounded,
    tiles: gemm_amx::Rounded,
}

thread_local! {
    static WORKSPACE: std::cell::RefCell<Workspace> = std::cell::RefCell::default();
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
    /// Which instructions attention uses on this CPU.
    attention_path: attention::Path,
    /// Whether the activation runs in AVX-512 on this CPU.
    avx512_activation: bool,
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
    /// are not the BERT model `config` describes. The forward uses the best [`Kernels`] this
    /// CPU has.
    pub(crate) fn load(vb: &VarBuilder, config: &Config) -> Result<Option<Self>, String> {
        Self::load_with(vb, config, Kernels::best())
    }

    /// As [`Self::load`], with `kernels` (`None` if the CPU lacks the products asked for).
    pub(crate) fn load_with(
        vb: &VarBuilder,
        config: &Config,
        kernels: Kernels,
    ) -> Result<Option<Self>, String> {
        if !kernels.precision.available()
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
        let embedding_norm = layer_norm(&embeddings.pp("LayerNorm"), hidden, eps, kernels)?;
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
                kernels,
            )?;
            layers.push(EncoderLayer {
                qkv,
                attention_out: Linear::fused(
                    &[&attention.pp("output.dense")],
                    hidden,
                    hidden,
                    kernels,
                )?,
                attention_norm: layer_norm(
                    &attention.pp("output.LayerNorm"),
                    hidden,
                    eps,
                    kernels,
                )?,
                intermediate: Linear::fused(
                    &[&layer.pp("intermediate.dense")],
                    hidden,
                    config.intermediate_size,
                    kernels,
                )?,
                output: Linear::fused(
                    &[&layer.pp("output.dense")],
                    config.intermediate_size,
                    hidden,
                    kernels,
                )?,
                output_norm: layer_norm(&layer.pp("output.LayerNorm"), hidden, eps, kernels)?,
            });
        }
        Ok(Some(Self {
            hidden,
            heads: config.num_attention_heads,
            activation: config.hidden_act,
            attention_path: if kernels.avx512 {
                attention::best_path(hidden / config.num_attention_heads)
            } else {
                attention::Path::Portable
            },
            avx512_activation: kernels.avx512 && activation::avx512_available(),
            word: word.iter().map(|&value| f16::from_f32(value)).collect(),
            position,
            token_type,
            embedding_norm,
            layers,
        }))
    }

    /// The sentence vector of one tokenised text: mean over every token of the last hidden
    /// state, L2-normalised. `ids` and `type_ids` have the same length, at most the model's
    /// position count (`local/passages.rs` cuts texts into passages of at most `max_seq_len`).
    pub(crate) fn embed(&self, ids: &[u32], type_ids: &[u32]) -> Result<Vec<f32>, String> {
        let hidden = self.hidden;
        let n_tokens = ids.len();
        if n_tokens == 0 || type_ids.len() != n_tokens || n_tokens * hidden > self.position.len() {
            return Err(format!(
                "{n_tokens} tokens do not fit the model's {} positions",
                self.position.len() / hidden
            ));
        }
        WORKSPACE.with_borrow_mut(|work| self.forward(ids, type_ids, work))
    }

    /// [`Self::embed`] in `work`'s buffers, the lengths checked.
    fn forward(
        &self,
        ids: &[u32],
        type_ids: &[u32],
        work: &mut Workspace,
    ) -> Result<Vec<f32>, String> {
        let (hidden, n_tokens) = (self.hidden, ids.len());
        let Workspace {
            states,
            qkv,
            context,
            projected,
            intermediate,
            rounded,
            attention: scratch,
        } = work;
        states.clear();
        states.resize(n_tokens * hidden, 0.0);
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
        self.embedding_norm.apply(states, None);

        context.clear();
        context.resize(n_tokens * hidden, 0.0);
        for layer in &self.layers {
            layer.qkv.forward(states, qkv, rounded);
            attention::attend(
                self.attention_path,
                qkv,
                n_tokens,
                hidden,
                self.heads,
                context,
                scratch,
            );
            layer.attention_out.forward(context, projected, rounded);
            layer.attention_norm.apply(states, Some(projected));

            layer.intermediate.forward(states, intermediate, rounded);
            activation::activate(self.activation, intermediate, self.avx512_activation);
            layer.output.forward(intermediate, projected, rounded);
            layer.output_norm.apply(states, Some(projected));
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
}

impl Linear {
    /// The linear layers in `parts` (each `out_dim × in_dim`, with bias) stacked into one:
    /// their outputs come side by side.
    fn fused(
        parts: &[&VarBuilder],
        in_dim: usize,
        out_dim: usize,
        kernels: Kernels,
    ) -> Result<Self, String> {
        let mut weight = Vec::with_capacity(parts.len() * out_dim * in_dim);
        let mut bias = Vec::with_capacity(parts.len() * out_dim);
        for part in parts {
            weight.extend(tensor(part, (out_dim, in_dim), "weight")?);
            bias.extend(tensor(part, out_dim, "bias")?);
        }
        Ok(Self::new(
            weight,
            bias,
            in_dim,
            parts.len() * out_dim,
            kernels,
        ))
    }

    /// The layer of `weight` (`out_dim × in_dim`) and `bias`, packed for `kernels`.
    fn new(
        weight: Vec<f32>,
        bias: Vec<f32>,
        in_dim: usize,
        out_dim: usize,
        kernels: Kernels,
    ) -> Self {
        Self {
            packed: match kernels.precision {
                Precision::Half => Packed::Half(
                    gemm::pack(&weight, in_dim, out_dim),
                    if kernels.avx512 {
                        gemm::best_path()
                    } else {
                        gemm::Path::Avx2
                    },
                ),
                Precision::Brain => Packed::Brain(gemm_bf16::pack(&weight, in_dim, out_dim)),
                Precision::NativeHalf => {
                    Packed::NativeHalf(gemm_fp16::pack(&weight, in_dim, out_dim))
                }
                Precision::Tiles => Packed::Tiles(gemm_amx::pack(&weight, &bias, in_dim, out_dim)),
            },
            bias,
            in_dim,
            out_dim,
        }
    }

    /// `output = input·Wᵀ + b` for every row of `input` (`n × in_dim`); `output` is resized to
    /// `n × out_dim`. `rounded` holds the rounded input of the products that round it.
    fn forward(&self, input: &[f32], output: &mut Vec<f32>, rounded: &mut RoundedInputs) {
        let n_rows = input.len() / self.in_dim;
        output.clear();
        output.resize(n_rows * self.out_dim, 0.0);
        match &self.packed {
            Packed::Half(packed, path) => gemm::linear(
                *path,
                input,
                packed,
                &self.bias,
                self.in_dim,
                self.out_dim,
                output,
            ),
            Packed::Brain(packed) => gemm_bf16::linear(
                input,
                packed,
                &self.bias,
                self.in_dim,
                self.out_dim,
                output,
                &mut rounded.brain,
            ),
            Packed::NativeHalf(packed) => gemm_fp16::linear(
                input,
                packed,
                &self.bias,
                self.in_dim,
                self.out_dim,
                output,
                &mut rounded.native_half,
            ),
            Packed::Tiles(packed) => gemm_amx::linear(
                input,
                packed,
                self.in_dim,
                self.out_dim,
                output,
                &mut rounded.tiles,
            ),
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
fn layer_norm(
    vb: &VarBuilder,
    width: usize,
    eps: f32,
    kernels: Kernels,
) -> Result<LayerNorm, String> {
    let pick = |names: [&'static str; 2]| {
        names
            .into_iter()
            .find(|name| vb.contains_tensor(name))
            .unwrap_or(names[0])
    };
    Ok(LayerNorm::new(
        tensor(vb, width, pick(["weight", "gamma"]))?,
        tensor(vb, width, pick(["bias", "beta"]))?,
        eps,
        kernels.avx512,
    ))
}

fn add_in_place(target: &mut [f32], addend: &[f32]) {
    for (target, addend) in target.iter_mut().zip(addend) {
        *target += addend;
    }
}

/// Deterministic values in [-spread, spread), in steps of 0.001 (xorshift from `seed`): the
/// tests' operands and the calibration's.
fn pseudo_random(count: usize, seed: u64, spread: f32) -> Vec<f32> {
    let steps = (2000.0 * spread) as u64 + 1;
    let mut state = seed | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % steps) as f32 / 1000.0 - spread
        })
        .collect()
}

#[cfg(test)]
mod tests;
