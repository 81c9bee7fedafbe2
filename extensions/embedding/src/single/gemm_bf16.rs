//! The matrix product in AVX-512 BF16: weights and inputs rounded to bfloat16, products summed
//! in f32 by `vdpbf16ps`, which multiplies and adds two pairs per lane (32 multiply-adds per
//! instruction, twice `vfmadd`'s sixteen). Runs on CPUs with AVX512_BF16 (Zen 4 and later,
//! Sapphire Rapids and later), and is chosen at load where it times fastest
//! ([`super::calibration`]); the test compares it with a plain product of the rounded values.

use half::bf16;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Output columns per panel: three AVX-512 registers of sixteen.
const PANEL: usize = 48;

/// Whether this CPU runs the product: AVX-512F and AVX512_BF16.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `weight` (`out_dim` rows of `in_dim`) in bfloat16, laid out as [`pack_pairs`] says.
pub(super) fn pack(weight: &[f32], in_dim: usize, out_dim: usize) -> Vec<bf16> {
    pack_pairs(weight, in_dim, out_dim, bf16::from_f32)
}

/// `weight` (`out_dim` rows of `in_dim`) converted by `convert` and laid out as the paired
/// products (this one and [`super::gemm_fp16`]) read it: panel by panel of [`PANEL`] outputs,
/// within a panel pair of input positions by pair, and within a pair each output's two weights
/// side by side (what one 32-bit lane multiplies). An odd input size and the last panel are
/// padded with zeros.
pub(super) fn pack_pairs<T: Copy + Default>(
    weight: &[f32],
    in_dim: usize,
    out_dim: usize,
    convert: impl Fn(f32) -> T,
) -> Vec<T> {
    let pairs = in_dim.div_ceil(2);
    let mut packed = vec![T::default(); out_dim.div_ceil(PANEL) * pairs * PANEL * 2];
    for (out, row) in weight.chunks_exact(in_dim).enumerate().take(out_dim) {
        let (panel, column) = (out / PANEL, out % PANEL);
        for (k, &value) in row.iter().enumerate() {
            packed[((panel * pairs + k / 2) * PANEL + column) * 2 + k % 2] = convert(value);
        }
    }
    packed
}

/// `output[r][o] = bias[o] + Σₖ input[r][k]·W[o][k]` for every row `r`, with `W` as [`pack`]
/// laid it out and each input rounded to bfloat16 into `rounded` (resized as needed).
///
/// # Panics
/// If the lengths disagree (a bug in the caller, not an input) or the CPU lacks the features
/// ([`available`]).
pub(super) fn linear(
    input: &[f32],
    packed: &[bf16],
    bias: &[f32],
    in_dim: usize,
    out_dim: usize,
    output: &mut [f32],
    rounded: &mut Vec<bf16>,
) {
    let pairs = in_dim.div_ceil(2);
    assert!(in_dim > 0 && packed.len() == out_dim.div_ceil(PANEL) * pairs * PANEL * 2);
    assert!(bias.len() == out_dim && input.len().is_multiple_of(in_dim));
    assert!(output.len() == input.len() / in_dim * out_dim);
    assert!(
        available(),
        "the BF16 product needs AVX-512F and AVX512_BF16"
    );
    #[cfg(target_arch = "x86_64")]
    {
        let n_rows = input.len() / in_dim;
        rounded.clear();
        rounded.resize(n_rows * pairs * 2, bf16::ZERO);
        for (row, rounded) in input
            .chunks_exact(in_dim)
            .zip(rounded.chunks_exact_mut(pairs * 2))
        {
            // SAFETY: the CPU has the features (asserted above).
            unsafe { round_avx512(row, rounded) };
        }
        let mut matrix = Matrix {
            rounded,
            packed,
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

/// `row` rounded to bfloat16 (to nearest, ties to even) into `rounded`, whose extra last
/// value, if any, stays zero.
///
/// # Safety
/// The CPU has AVX-512F and AVX512_BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn round_avx512(row: &[f32], rounded: &mut [bf16]) {
    let (chunks, tail) = row.as_chunks::<16>();
    for (chunk, out) in chunks.iter().zip(rounded.chunks_exact_mut(16)) {
        // SAFETY: `chunk` holds sixteen f32 and `out` sixteen bf16 (32 bytes).
        unsafe {
            let half: __m256i =
                std::mem::transmute(_mm512_cvtneps_pbh(_mm512_loadu_ps(chunk.as_ptr())));
            _mm256_storeu_si256(out.as_mut_ptr().cast(), half);
        }
    }
    for (value, out) in tail.iter().zip(&mut rounded[chunks.len() * 16..]) {
        *out = bf16::from_f32(*value);
    }
}

/// The operands of one product, with the lengths [`linear`] asserted.
struct Matrix<'a> {
    /// The input rows in bfloat16, each `pairs` pairs long.
    rounded: &'a [bf16],
    packed: &'a [bf16],
    bias: &'a [f32],
    pairs: usize,
    out_dim: usize,
    output: &'a mut [f32],
}

#[cfg(target_arch = "x86_64")]
impl Matrix<'_> {
    /// # Safety
    /// The CPU has AVX-512F and AVX512_BF16; `rounded` holds `n_rows` rows; the other lengths
    /// are those [`linear`] asserts.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn product(&mut self, n_rows: usize) {
        for_each_tile!(self, tile, self.out_dim.div_ceil(PANEL), n_rows);
    }

    /// Output rows `row..row + R` of one panel's columns: with `R` = 8, 8 × 3 accumulators,
    /// 3 weight registers and 1 broadcast input of the 32 registers.
    ///
    /// # Safety
    /// As [`Self::product`], and `row + R` is at most the number of input rows.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn tile<const R: usize>(&mut self, panel: usize, row: usize) {
        let pairs = self.pairs;
        let weights = self.packed[panel * pairs * PANEL * 2..][..pairs * PANEL * 2].as_ptr();
        // A pair of bf16 inputs is one 32-bit value, broadcast to every lane.
        let inputs = self.rounded[row * pairs * 2..][..R * pairs * 2]
            .as_ptr()
            .cast::<i32>();
        let mut acc = [[_mm512_setzero_ps(); 3]; R];
        for pair in 0..pairs {
            // SAFETY: the panel slice holds `pairs * PANEL * 2` weights and the input slice
            // `R * pairs` pairs (both bounds-checked when taken above); `pair < pairs`. The
            // transmutes reinterpret 512 bits as 32 bf16, which any bits are.
            let (w0, w1, w2): (__m512bh, __m512bh, __m512bh) = unsafe {
                let at = weights.add(pair * PANEL * 2);
                (
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(at.cast())),
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(at.add(32).cast())),
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(at.add(64).cast())),
                )
            };
            for (lane, acc) in acc.iter_mut().enumerate() {
                // SAFETY: as above, `lane < R`; the read is unaligned (bf16 are 2-aligned).
                let input: __m512bh = unsafe {
                    std::mem::transmute(_mm512_set1_epi32(
                        inputs.add(lane * pairs + pair).read_unaligned(),
                    ))
                };
                acc[0] = _mm512_dpbf16_ps(acc[0], input, w0);
                acc[1] = _mm512_dpbf16_ps(acc[1], input, w1);
                acc[2] = _mm512_dpbf16_ps(acc[2], input, w2);
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
            let out_row = &mut self.output[(row + lane) * self.out_dim + first..][..columns];
            for ((out, sum), bias) in out_row.iter_mut().zip(&sums).zip(&self.bias[first..]) {
                *out = sum + bias;
            }
        }
    }
}

/// Asserts that `product(input, weight, bias, in_dim, out_dim)` computes, for each of
/// `shapes` (rows, inputs, outputs), the plain product of the inputs and weights rounded to
/// bfloat16, plus the bias: the test of this product and of [`super::gemm_amx`]'s.
#[cfg(test)]
pub(super) fn assert_products_of_rounded_values(
    shapes: &[(usize, usize, usize)],
    mut product: impl FnMut(&[f32], &[f32], &[f32], usize, usize) -> Vec<f32>,
) {
    let values = |count: usize, seed: u64| super::pseudo_random(count, seed, 1.0);
    let round = |value: f32| f64::from(bf16::from_f32(value).to_f32());
    for &(rows, in_dim, out_dim) in shapes {
        let weight = values(out_dim * in_dim, 7 + in_dim as u64);
        let input = values(rows * in_dim, 11 + out_dim as u64);
        let bias = values(out_dim, 13);
        let output = product(&input, &weight, &bias, in_dim, out_dim);
        assert_eq!(output.len(), rows * out_dim);
        for row in 0..rows {
            for out in 0..out_dim {
                let expected = f64::from(bias[out])
                    + (0..in_dim)
                        .map(|k| round(input[row * in_dim + k]) * round(weight[out * in_dim + k]))
                        .sum::<f64>();
                let got = f64::from(output[row * out_dim + out]);
                assert!(
                    (got - expected).abs() < 1e-5 * in_dim as f64,
                    "{rows}x{in_dim}x{out_dim} [{row}][{out}]: {got} vs {expected}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{assert_products_of_rounded_values, available, linear, pack};

    #[test]
    fn the_bf16_product_matches_a_plain_product_of_rounded_values() {
        if !available() {
            eprintln!("skipped: this CPU lacks AVX512_BF16, so the path is never taken");
            return;
        }
        let mut rounded = Vec::new();
        // Odd input sizes, ragged panels and token tiles, and the model's own shapes.
        let shapes = [
            (1, 8, 5),
            (3, 17, 48),
            (9, 40, 100),
            (13, 384, 1152),
            (7, 1536, 384),
            (17, 33, 97),
        ];
        assert_products_of_rounded_values(&shapes, |input, weight, bias, in_dim, out_dim| {
            let packed = pack(weight, in_dim, out_dim);
            let mut output = vec![f32::NAN; input.len() / in_dim * out_dim];
            linear(
                input,
                &packed,
                bias,
                in_dim,
                out_dim,
                &mut output,
                &mut rounded,
            );
            output
        });
    }
}
