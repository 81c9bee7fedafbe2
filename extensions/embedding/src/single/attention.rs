//! Scaled dot-product attention of one text (no padding mask), head by head.
//!
//! Each head is two small matrix products around a softmax: scores `Q·Kᵀ` (tokens × tokens),
//! then the softmax-weighted sum of the values. On a 200-token text the scalar loops took about
//! half of the forward pass, more than all the linear layers together; the AVX-512 path computes
//! them in register tiles (eight queries against 32 keys, then eight queries' 32 output columns)
//! with a vectorised `exp`, over a transposed copy of the head's keys.

#[cfg(target_arch = "x86_64")]
use super::activation;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Queries per register tile: 8 × 2 accumulators, so that sixteen independent sums hide the
/// multiply-add latency (with 4, attention took 16% of a long text instead of 13%).
const QUERIES: usize = 8;
/// Keys per score tile and value columns per output tile: two AVX-512 registers.
const BLOCK: usize = 32;

/// Which instructions attention uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Path {
    /// Plain Rust, one query and one key at a time.
    Portable,
    /// AVX-512F register tiles; needs a head size that is a multiple of [`BLOCK`].
    Avx512,
}

/// The fastest path this CPU runs for heads of `head_dim` values.
pub(super) fn best_path(head_dim: usize) -> Path {
    #[cfg(target_arch = "x86_64")]
    if head_dim.is_multiple_of(BLOCK)
        && head_dim > 0
        && std::arch::is_x86_feature_detected!("avx512f")
    {
        return Path::Avx512;
    }
    let _ = head_dim;
    Path::Portable
}

/// Buffers reused from layer to layer.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// One head's keys, transposed: `head_dim` rows of the token count rounded up to [`BLOCK`].
    keys: Vec<f32>,
    /// The scores (then the softmax numerators) of one tile of queries.
    scores: Vec<f32>,
}

/// Attention of every head over all `n_tokens` tokens. `qkv` holds each token's `[q | k | v]`
/// row (`3 × hidden` values); the heads' outputs go side by side in `context`
/// (`n_tokens × hidden`).
///
/// # Panics
/// If the lengths disagree (a bug in the caller, not an input), or if `path` is one
/// [`best_path`] would not choose for this head size on this CPU.
pub(super) fn attend(
    path: Path,
    qkv: &[f32],
    n_tokens: usize,
    hidden: usize,
    heads: usize,
    context: &mut [f32],
    scratch: &mut Scratch,
) {
    assert!(heads > 0 && hidden.is_multiple_of(heads));
    assert!(qkv.len() == n_tokens * 3 * hidden && context.len() == n_tokens * hidden);
    let head_dim = hidden / heads;
    match path {
        Path::Portable => attend_portable(qkv, n_tokens, hidden, heads, context),
        Path::Avx512 => {
            #[cfg(target_arch = "x86_64")]
            {
                assert!(
                    best_path(head_dim) == Path::Avx512,
                    "the AVX-512 attention needs AVX-512F and heads of a multiple of {BLOCK}"
                );
                let padded = n_tokens.next_multiple_of(BLOCK);
                scratch.keys.clear();
                scratch.keys.resize(head_dim * padded, 0.0);
                scratch.scores.clear();
                scratch.scores.resize(QUERIES * padded, 0.0);
                let mut heads_view = Heads {
                    qkv,
                    n_tokens,
                    padded,
                    hidden,
                    head_dim,
                    scale: 1.0 / (head_dim as f32).sqrt(),
                    context,
                    scratch,
                };
                for head in 0..heads {
                    // SAFETY: the CPU has AVX-512F (asserted above); the lengths `Heads` relies
                    // on were asserted or set just above, and `head < heads`.
                    unsafe { heads_view.head_avx512(head) };
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("best_path never chooses AVX-512 off x86_64");
        }
    }
}

/// One query and one key at a time, in plain Rust: the reference the AVX-512 path is tested
/// against, and the path on CPUs without AVX-512.
fn attend_portable(qkv: &[f32], n_tokens: usize, hidden: usize, heads: usize, context: &mut [f32]) {
    let head_dim = hidden / heads;
    let scale = 1.0 / (head_dim as f32).sqrt();
    let mut scores = vec![0.0f32; n_tokens];
    for head in 0..heads {
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

/// The operands of one layer's attention, with the lengths [`attend`] asserted: `keys` holds
/// `head_dim × padded` values and `scores` `QUERIES × padded`.
struct Heads<'a> {
    qkv: &'a [f32],
    n_tokens: usize,
    /// `n_tokens` rounded up to [`BLOCK`]: the width of a transposed key row and a score row.
    padded: usize,
    hidden: usize,
    head_dim: usize,
    scale: f32,
    context: &'a mut [f32],
    scratch: &'a mut Scratch,
}

#[cfg(target_arch = "x86_64")]
impl Heads<'_> {
    /// Attention of head `head` for every query.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `head_dim` is a multiple of [`BLOCK`]; the lengths are those
    /// [`attend`] asserts and sets; `head` is below `hidden / head_dim`.
    #[target_feature(enable = "avx512f")]
    unsafe fn head_avx512(&mut self, head: usize) {
        let (n_tokens, padded, hidden) = (self.n_tokens, self.padded, self.hidden);
        let offset = head * self.head_dim;
        // Keys transposed, so that a register holds one dimension of sixteen keys. The columns
        // past `n_tokens` stay zero: their scores are computed and then ignored.
        for token in 0..n_tokens {
            let key = &self.qkv[token * 3 * hidden + hidden + offset..][..self.head_dim];
            for (dim, &value) in key.iter().enumerate() {
                self.scratch.keys[dim * padded + token] = value;
            }
        }
        let mut first = 0;
        while first < n_tokens {
            let rows = QUERIES.min(n_tokens - first);
            // SAFETY: `first + rows <= n_tokens`, and the caller's guarantees.
            unsafe {
                match rows {
                    8 => self.tile::<8>(offset, first),
                    7 => self.tile::<7>(offset, first),
                    6 => self.tile::<6>(offset, first),
                    5 => self.tile::<5>(offset, first),
                    4 => self.tile::<4>(offset, first),
                    3 => self.tile::<3>(offset, first),
                    2 => self.tile::<2>(offset, first),
                    _ => self.tile::<1>(offset, first),
                }
            }
            first += rows;
        }
    }

    /// Queries `first..first + R` of the head whose values start at column `offset`.
    ///
    /// # Safety
    /// As [`Self::head_avx512`], `R <= QUERIES` and `first + R <= n_tokens`.
    #[target_feature(enable = "avx512f")]
    unsafe fn tile<const R: usize>(&mut self, offset: usize, first: usize) {
        let (n_tokens, padded, hidden, head_dim) =
            (self.n_tokens, self.padded, self.hidden, self.head_dim);
        let stride = 3 * hidden;
        // Bounds-checked slices, then raw pointers inside the loops.
        let queries = self.qkv[first * stride..][..(R - 1) * stride + hidden].as_ptr();
        let keys = self.scratch.keys[..head_dim * padded].as_ptr();
        let scores = self.scratch.scores[..R * padded].as_mut_ptr();
        let values = self.qkv[2 * hidden + offset..][..(n_tokens - 1) * stride + head_dim].as_ptr();
        let scale = _mm512_set1_ps(self.scale);

        // Scores: R queries against 32 keys at a time.
        for key_block in (0..padded).step_by(BLOCK) {
            let mut acc = [[_mm512_setzero_ps(); 2]; R];
            for dim in 0..head_dim {
                // SAFETY: `dim < head_dim` and `key_block + 32 <= padded`: inside `keys`.
                let (k0, k1) = unsafe {
                    let at = keys.add(dim * padded + key_block);
                    (_mm512_loadu_ps(at), _mm512_loadu_ps(at.add(16)))
                };
                for (row, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: `row < R` and `offset + dim < hidden`: inside `queries`.
                    let query =
                        _mm512_set1_ps(unsafe { *queries.add(row * stride + offset + dim) });
                    acc[0] = _mm512_fmadd_ps(query, k0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(query, k1, acc[1]);
                }
            }
            for (row, acc) in acc.iter().enumerate() {
                // SAFETY: `row < R` and `key_block + 32 <= padded`: inside `scores`.
                unsafe {
                    let at = scores.add(row * padded + key_block);
                    _mm512_storeu_ps(at, _mm512_mul_ps(acc[0], scale));
                    _mm512_storeu_ps(at.add(16), _mm512_mul_ps(acc[1], scale));
                }
            }
        }

        // Softmax numerators; the division by their sum waits for the output.
        let mut inverse_sums = [0.0f32; R];
        for (row, inverse_sum) in inverse_sums.iter_mut().enumerate() {
            // SAFETY: row `row < R` of `scores` holds `padded >= n_tokens` values.
            let row_scores =
                unsafe { std::slice::from_raw_parts_mut(scores.add(row * padded), n_tokens) };
            // SAFETY: the caller guarantees AVX-512F.
            *inverse_sum = 1.0 / unsafe { activation::softmax_numerators_avx512(row_scores) };
        }

        // Output: R queries' weighted sums of the values, 32 columns at a time.
        for column in (0..head_dim).step_by(BLOCK) {
            let mut acc = [[_mm512_setzero_ps(); 2]; R];
            for token in 0..n_tokens {
                // SAFETY: `token < n_tokens` and `column + 32 <= head_dim`: inside `values`.
                let (v0, v1) = unsafe {
                    let at = values.add(token * stride + column);
                    (_mm512_loadu_ps(at), _mm512_loadu_ps(at.add(16)))
                };
                for (row, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: `row < R` and `token < padded`: inside `scores`.
                    let weight = _mm512_set1_ps(unsafe { *scores.add(row * padded + token) });
                    acc[0] = _mm512_fmadd_ps(weight, v0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(weight, v1, acc[1]);
                }
            }
            for (row, acc) in acc.iter().enumerate() {
                let out = &mut self.context[(first + row) * hidden + offset + column..][..BLOCK];
                let inverse_sum = _mm512_set1_ps(inverse_sums[row]);
                // SAFETY: `out` holds 32 values (bounds-checked above).
                unsafe {
                    _mm512_storeu_ps(out.as_mut_ptr(), _mm512_mul_ps(acc[0], inverse_sum));
                    _mm512_storeu_ps(out.as_mut_ptr().add(16), _mm512_mul_ps(acc[1], inverse_sum));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{attend, best_path, Path, Scratch};

    /// Deterministic values in [-2, 2).
    fn values(count: usize, seed: u64) -> Vec<f32> {
        super::super::pseudo_random(count, seed, 2.0)
    }

    #[test]
    fn the_avx512_path_matches_the_portable_one() {
        if best_path(32) != Path::Avx512 {
            eprintln!("skipped: this CPU lacks AVX-512F, so the path is never taken");
            return;
        }
        let mut scratch = Scratch::default();
        // Token counts around the tiles' edges, the model's own head size and a larger one;
        // one scratch across all, as the layers share it.
        for (n_tokens, hidden, heads) in [
            (1, 384, 12),
            (3, 64, 2),
            (31, 384, 12),
            (33, 384, 12),
            (210, 384, 12),
            (256, 384, 12),
            (5, 128, 2),
            (17, 384, 12),
        ] {
            let qkv = values(n_tokens * 3 * hidden, 3 + n_tokens as u64);
            let mut expected = vec![0.0f32; n_tokens * hidden];
            let mut got = vec![f32::NAN; n_tokens * hidden];
            attend(
                Path::Portable,
                &qkv,
                n_tokens,
                hidden,
                heads,
                &mut expected,
                &mut scratch,
            );
            attend(
                Path::Avx512,
                &qkv,
                n_tokens,
                hidden,
                heads,
                &mut got,
                &mut scratch,
            );
            for (index, (got, expected)) in got.iter().zip(&expected).enumerate() {
                assert!(
                    (got - expected).abs() < 1e-5,
                    "{n_tokens} tokens, hidden {hidden}, {heads} heads, [{index}]: {got} vs {expected}"
                );
            }
        }
    }
}
