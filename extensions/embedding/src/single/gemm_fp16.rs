//! The matrix product in AVX512-FP16 arithmetic: weights and inputs in half precision,
//! multiplied and added by `vfmadd231ph` on 32 lanes, twice `vfmadd231ps`'s sixteen (and here
//! at full rate, where `vdpbf16ps` is not: 186 G multiply-adds/s against 84 G and 42 G on the
//! CI machine on 2026-11-27). Half precision holds three more bits than bfloat16, but its sums
//! would lose them over a long row, so each lane sums [`RUN`] products in half precision and
//! then hands them to an f32 sum. Inputs whose products could leave half precision's range are
//! scaled by a power of two first (exact), and the sums scaled back.
//!
//! The layout is [`super::gemm_bf16`]'s: within a panel, a pair of input positions at a time,
//! each output's two weights side by side. A broadcast input pair then multiplies every
//! output's pair, and the two halves of each output's sum are added at the end.

use half::f16;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Output columns per panel: three AVX-512 registers of sixteen pairs.
const PANEL: usize = 48;
/// Input pairs summed in half precision before the f32 sum takes them over.
const RUN: usize = 64;
/// The largest magnitude a half-precision run may reach: far inside its range (65504), so
/// that no sum of [`RUN`] products overflows.
const RUN_LIMIT: f32 = 4096.0;

/// The largest magnitude an input may keep when rounded: inside half precision's range.
const INPUT_LIMIT: f32 = 32768.0;

/// Whether this CPU runs the product: AVX-512F, AVX512-BW and AVX512-FP16.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512fp16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A layer's weights as the product reads them, with their largest magnitude.
pub(super) struct PackedHalf {
    weights: Vec<f16>,
    largest: f32,
}

/// `weight` (`out_dim` rows of `in_dim`) packed for [`linear`].
pub(super) fn pack(weight: &[f32], in_dim: usize, out_dim: usize) -> PackedHalf {
    PackedHalf {
        weights: super::gemm_bf16::pack_pairs(weight, in_dim, out_dim, f16::from_f32),
        largest: weight
            .iter()
            .fold(0.0f32, |largest, value| largest.max(value.abs())),
    }
}

/// The inputs of one product in half precision, and each row's scale.
#[derive(Default)]
pub(super) struct Rounded {
    values: Vec<f16>,
    /// What each row was multiplied by before rounding: 1, or a power of two below it.
    scales: Vec<f32>,
}

/// `output[r][o] = bias[o] + Σₖ input[r][k]·W[o][k]` for every row `r`, with `W` as [`pack`]
/// laid it out and each input rounded to half precision into `rounded`.
///
/// # Panics
/// If the lengths disagree (a bug in the caller, not an input) or the CPU lacks the features
/// ([`available`]).
pub(super) fn linear(
    input: &[f32],
    packed: &PackedHalf,
    bias: &[f32],
    in_dim: usize,
    out_dim: usize,
    output: &mut [f32],
    rounded: &mut Rounded,
) {
    let pairs = in_dim.div_ceil(2);
    assert!(in_dim > 0 && packed.weights.len() == out_dim.div_ceil(PANEL) * pairs * PANEL * 2);
    assert!(bias.len() == out_dim && input.len().is_multiple_of(in_dim));
    assert!(output.len() == input.len() / in_dim * out_dim);
    assert!(
        available(),
        "the FP16 product needs AVX-512F, AVX512-BW and AVX512-FP16"
    );
    #[cfg(target_arch = "x86_64")]
    {
        let n_rows = input.len() / in_dim;
        // A run's sum is at most RUN · largest input · largest weight.
        // Capped inside half precision's range, which the rounded input must fit too.
        let bound =
            (RUN_LIMIT / (RUN as f32 * packed.largest.max(f32::MIN_POSITIVE))).min(INPUT_LIMIT);
        rounded.values.clear();
        rounded.values.resize(n_rows * pairs * 2, f16::ZERO);
        rounded.scales.clear();
        for (row, values) in input
            .chunks_exact(in_dim)
            .zip(rounded.values.chunks_exact_mut(pairs * 2))
        {
            // SAFETY: the CPU has the features (asserted above).
            let scale = scale_below(unsafe { largest_avx512(row) }, bound);
            rounded.scales.push(scale);
            // SAFETY: the CPU has the features (asserted above).
            unsafe { round_avx512(row, scale, values) };
        }
        let mut matrix = Matrix {
            rounded,
            packed: &packed.weights,
            bias,
            pairs,
            out_dim,
            output,
        };
        // SAFETY: the CPU has the features (asserted above); `rounded` holds `n_rows` rows of
        // `pairs` pairs, and the other lengths were asserted above.
        unsafe { matrix.product(n_rows) };
    }
}

/// 1 if `largest` is at most `bound`, else the largest power of two that brings it there.
/// Inputs that are not finite keep scale 1, so their outputs are not finite, as in f32.
fn scale_below(largest: f32, bound: f32) -> f32 {
    if !largest.is_finite() || largest <= bound {
        return 1.0;
    }
    let mut scale = 1.0f32;
    while largest * scale > bound {
        scale *= 0.5;
    }
    scale
}

/// The largest magnitude in `row`, NaN values aside (whatever the scale, a NaN input's
/// outputs are NaN, as in f32).
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn largest_avx512(row: &[f32]) -> f32 {
    let (chunks, tail) = row.as_chunks::<16>();
    let mut largest = _mm512_setzero_ps();
    for chunk in chunks {
        // SAFETY: `chunk` holds sixteen f32.
        let values = _mm512_abs_ps(unsafe { _mm512_loadu_ps(chunk.as_ptr()) });
        // `vmaxps` returns its second operand when either is NaN: the running maximum.
        largest = _mm512_max_ps(values, largest);
    }
    tail.iter()
        .fold(_mm512_reduce_max_ps(largest), |largest, value| {
            largest.max(value.abs())
        })
}

/// `row` times `scale`, rounded to half precision (to nearest, ties to even) into `values`,
/// whose extra last value, if any, stays zero.
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn round_avx512(row: &[f32], scale: f32, values: &mut [f16]) {
    let (chunks, tail) = row.as_chunks::<16>();
    let factor = _mm512_set1_ps(scale);
    for (chunk, out) in chunks.iter().zip(values.chunks_exact_mut(16)) {
        // SAFETY: `chunk` holds sixteen f32 and `out` sixteen f16 (32 bytes).
        unsafe {
            let scaled = _mm512_mul_ps(_mm512_loadu_ps(chunk.as_ptr()), factor);
            let half = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(scaled);
            _mm256_storeu_si256(out.as_mut_ptr().cast(), half);
        }
    }
    for (value, out) in tail.iter().zip(&mut values[chunks.len() * 16..]) {
        *out = f16::from_f32(value * scale);
    }
}

/// The half-precision sums over input pairs `pairs_run` of a tile's `R` rows and one panel's
/// columns. Kept out of line so that its 24 accumulators stay in registers: inlined into the
/// tile, which also keeps the f32 sums, they were spilled to the stack on every step.
///
/// # Safety
/// The CPU has AVX-512F, AVX512-BW and AVX512-FP16; `weights` points at a panel of
/// `pairs * PANEL * 2` weights and `inputs` at `R` rows of `pairs` input pairs;
/// `pairs_run.end <= pairs`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512fp16")]
#[inline(never)]
unsafe fn run<const R: usize>(
    weights: *const f16,
    inputs: *const i32,
    pairs: usize,
    pairs_run: std::ops::Range<usize>,
) -> [[__m512h; 3]; R] {
    let mut acc = [[_mm512_setzero_ph(); 3]; R];
    for pair in pairs_run {
        // SAFETY: the panel holds `pairs * PANEL * 2` weights and the inputs `R * pairs`
        // pairs; `pair < pairs`. Any 512 bits are 32 f16.
        let (w0, w1, w2) = unsafe {
            let at = weights.add(pair * PANEL * 2);
            (
                _mm512_castsi512_ph(_mm512_loadu_si512(at.cast())),
                _mm512_castsi512_ph(_mm512_loadu_si512(at.add(32).cast())),
                _mm512_castsi512_ph(_mm512_loadu_si512(at.add(64).cast())),
            )
        };
        for (lane, acc) in acc.iter_mut().enumerate() {
            // SAFETY: as above, `lane < R`; the read is unaligned (f16 are 2-aligned).
            let input = _mm512_castsi512_ph(_mm512_set1_epi32(unsafe {
                inputs.add(lane * pairs + pair).read_unaligned()
            }));
            acc[0] = _mm512_fmadd_ph(input, w0, acc[0]);
            acc[1] = _mm512_fmadd_ph(input, w1, acc[1]);
            acc[2] = _mm512_fmadd_ph(input, w2, acc[2]);
        }
    }
    acc
}

/// The operands of one product, with the lengths [`linear`] asserted.
struct Matrix<'a> {
    rounded: &'a Rounded,
    packed: &'a [f16],
    bias: &'a [f32],
    pairs: usize,
    out_dim: usize,
    output: &'a mut [f32],
}

#[cfg(target_arch = "x86_64")]
impl Matrix<'_> {
    /// # Safety
    /// The CPU has AVX-512F, AVX512-BW and AVX512-FP16; `rounded` holds `n_rows` rows; the
    /// other lengths are those [`linear`] asserts.
    #[target_feature(enable = "avx512f,avx512bw,avx512fp16")]
    unsafe fn product(&mut self, n_rows: usize) {
        for_each_tile!(self, tile, self.out_dim.div_ceil(PANEL), n_rows);
    }

    /// Output rows `row..row + R` of one panel's columns: [`run`] after [`run`] of half
    /// precision sums, each added to the f32 sums kept here (six registers' worth a row, in
    /// memory), then each output's two halves added.
    ///
    /// # Safety
    /// As [`Self::product`], and `row + R` is at most the number of input rows.
    #[target_feature(enable = "avx512f,avx512bw,avx512fp16")]
    unsafe fn tile<const R: usize>(&mut self, panel: usize, row: usize) {
        let pairs = self.pairs;
        let weights = self.packed[panel * pairs * PANEL * 2..][..pairs * PANEL * 2].as_ptr();
        // A pair of f16 inputs is one 32-bit value, broadcast to every lane.
        let inputs = self.rounded.values[row * pairs * 2..][..R * pairs * 2]
            .as_ptr()
            .cast::<i32>();
        // Per row, each output's even and odd half of the sum, side by side.
        let mut sums = [[_mm512_setzero_ps(); 6]; R];
        let mut start = 0;
        while start < pairs {
            let end = pairs.min(start + RUN);
            // SAFETY: as this function's, and `start < end <= pairs`.
            let acc = unsafe { run::<R>(weights, inputs, pairs, start..end) };
            for (sums, acc) in sums.iter_mut().zip(&acc) {
                for (part, acc) in acc.iter().enumerate() {
                    let bits = _mm512_castph_si512(*acc);
                    let low = _mm512_cvtph_ps(_mm512_castsi512_si256(bits));
                    let high = _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(bits));
                    sums[part * 2] = _mm512_add_ps(sums[part * 2], low);
                    sums[part * 2 + 1] = _mm512_add_ps(sums[part * 2 + 1], high);
                }
            }
            start = end;
        }
        let first = panel * PANEL;
        let columns = PANEL.min(self.out_dim - first);
        // Lane 2j of a register pair (low, high) holds output j's even half, lane 2j + 1 its
        // odd half.
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        for (lane, sums) in sums.iter().enumerate() {
            let unscale = _mm512_set1_ps(1.0 / self.rounded.scales[row + lane]);
            let out_row = &mut self.output[(row + lane) * self.out_dim + first..][..columns];
            let bias = &self.bias[first..][..columns];
            for part in 0..3 {
                let start = part * 16;
                if start >= columns {
                    break;
                }
                let mask: __mmask16 = (1u32 << (columns - start).min(16)).wrapping_sub(1) as u16;
                let (low, high) = (sums[part * 2], sums[part * 2 + 1]);
                let total = _mm512_add_ps(
                    _mm512_permutex2var_ps(low, even, high),
                    _mm512_permutex2var_ps(low, odd, high),
                );
                // SAFETY: `mask` covers only the `columns - start` outputs and biases left
                // from `start` on, within `out_row` and `bias` (both `columns` long).
                unsafe {
                    let bias = _mm512_maskz_loadu_ps(mask, bias.as_ptr().add(start));
                    let value = _mm512_fmadd_ps(total, unscale, bias);
                    _mm512_mask_storeu_ps(out_row.as_mut_ptr().add(start), mask, value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{available, linear, pack, scale_below, Rounded};
    use half::f16;

    /// Deterministic values in [-`range`, `range`).
    fn values(count: usize, seed: u64, range: f32) -> Vec<f32> {
        super::super::pseudo_random(count, seed, range)
    }

    /// `bias + input · Wᵀ` in f64 over the values as the product rounds them: each input row
    /// times its `scale`, both operands in half precision, the row scaled back.
    fn plain_product(
        input: &[f32],
        weight: &[f32],
        bias: &[f32],
        in_dim: usize,
        scales: &[f32],
    ) -> Vec<f64> {
        let out_dim = bias.len();
        let round = |value: f32| f64::from(f16::from_f32(value).to_f32());
        let mut output = Vec::new();
        for (row, scale) in input.chunks_exact(in_dim).zip(scales) {
            for out in 0..out_dim {
                let sum: f64 = (0..in_dim)
                    .map(|k| round(row[k] * scale) * round(weight[out * in_dim + k]))
                    .sum();
                output.push(f64::from(bias[out]) + sum / f64::from(*scale));
            }
        }
        output
    }

    #[test]
    fn the_fp16_product_matches_a_plain_product_of_rounded_values() {
        if !available() {
            eprintln!("skipped: this CPU lacks AVX512-FP16, so the path is never taken");
            return;
        }
        let mut rounded = Rounded::default();
        // Odd input sizes, ragged panels and token tiles, the model's own shapes, and inputs
        // large enough that a half-precision run would overflow unscaled.
        for (rows, in_dim, out_dim, range) in [
            (1, 8, 5, 1.0),
            (3, 17, 48, 1.0),
            (9, 40, 100, 1.0),
            (13, 384, 1152, 1.0),
            (7, 1536, 384, 1.0),
            (17, 33, 97, 1.0),
            (5, 301, 50, 1.0),
            (5, 384, 64, 30000.0),
        ] {
            let weight = values(out_dim * in_dim, 7 + in_dim as u64, 1.0);
            let input = values(rows * in_dim, 11 + out_dim as u64, range);
            let bias = values(out_dim, 13, 1.0);
            let packed = pack(&weight, in_dim, out_dim);
            let mut output = vec![f32::NAN; rows * out_dim];
            linear(
                &input,
                &packed,
                &bias,
                in_dim,
                out_dim,
                &mut output,
                &mut rounded,
            );
            if range > 1.0 {
                assert!(
                    rounded.scales.iter().all(|&scale| scale < 1.0),
                    "inputs up to {range} were not scaled: {:?}",
                    rounded.scales
                );
            } else {
                assert!(rounded.scales.iter().all(|&scale| scale == 1.0));
            }
            let expected = plain_product(&input, &weight, &bias, in_dim, &rounded.scales);
            // Runs of 64 half-precision sums: a relative error of a few 2⁻¹¹ of each run.
            let tolerance = 4e-3 * f64::from(range) * (in_dim as f64).sqrt();
            for (index, (got, expected)) in output.iter().zip(&expected).enumerate() {
                let got = f64::from(*got);
                assert!(
                    got.is_finite() && (got - expected).abs() < tolerance,
                    "{rows}x{in_dim}x{out_dim} [{}][{}]: {got} vs {expected}",
                    index / out_dim,
                    index % out_dim
                );
            }
        }
    }

    #[test]
    fn a_row_that_is_not_finite_stays_so_and_leaves_the_others_alone() {
        if !available() {
            eprintln!("skipped: this CPU lacks AVX512-FP16, so the path is never taken");
            return;
        }
        let (in_dim, out_dim) = (40, 50);
        let weight = values(out_dim * in_dim, 3, 1.0);
        let mut input = values(3 * in_dim, 5, 1.0);
        input[in_dim + 7] = f32::NAN;
        let packed = pack(&weight, in_dim, out_dim);
        let mut output = vec![0.0; 3 * out_dim];
        let mut rounded = Rounded::default();
        let bias = vec![0.0; out_dim];
        linear(
            &input,
            &packed,
            &bias,
            in_dim,
            out_dim,
            &mut output,
            &mut rounded,
        );
        assert!(output[out_dim..2 * out_dim]
            .iter()
            .all(|value| value.is_nan()));
        assert!(output[..out_dim].iter().all(|value| value.is_finite()));
        assert!(output[2 * out_dim..].iter().all(|value| value.is_finite()));
    }

    #[test]
    fn scales_are_powers_of_two_and_only_where_needed() {
        assert_eq!(scale_below(64.0, 64.0), 1.0);
        assert_eq!(scale_below(65.0, 64.0), 0.5);
        assert_eq!(scale_below(1000.0, 64.0), 0.0625);
        assert_eq!(scale_below(0.0, 64.0), 1.0);
        assert_eq!(scale_below(f32::NAN, 64.0), 1.0);
        assert_eq!(scale_below(f32::INFINITY, 64.0), 1.0);
    }
}
