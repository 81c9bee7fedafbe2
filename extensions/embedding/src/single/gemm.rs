//! The matrix product of the packed forward, in AVX2/FMA/F16C or AVX-512 intrinsics. Only
//! reached after [`super::cpu_supported`].

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
        for_each_tile!(self, tile_avx512, self.out_dim.div_ceil(PANEL), n_rows);
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

#[cfg(test)]
mod tests {
    use super::{self as gemm, Path};
    use half::f16;

    /// Deterministic values in [-1, 1).
    fn values(count: usize, seed: u64) -> Vec<f32> {
        super::super::pseudo_random(count, seed, 1.0)
    }

    #[test]
    fn every_product_path_matches_a_plain_product() {
        if !super::super::cpu_supported() {
            eprintln!("skipped: this CPU lacks AVX2, FMA or F16C, so the path is never taken");
            return;
        }
        let mut paths = vec![Path::Avx2];
        if gemm::best_path() == Path::Avx512 {
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
            let packed = gemm::pack(&weight, in_dim, out_dim);
            for &path in &paths {
                let mut output = vec![0.0f32; rows * out_dim];
                gemm::linear(path, &input, &packed, &bias, in_dim, out_dim, &mut output);
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
