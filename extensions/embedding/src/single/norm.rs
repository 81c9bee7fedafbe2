//! Layer normalisation, with the residual connection that precedes it in every BERT layer
//! folded into the same pass over each row: in plain Rust, and in AVX-512 where the CPU has it
//! (the plain loops took 6.5% of a long text once the products were in bfloat16).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Layer normalisation over rows of `gamma.len()` values.
pub(super) struct LayerNorm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
    /// Whether [`LayerNorm::apply`] runs in AVX-512: the CPU has AVX-512F and the width is a
    /// multiple of sixteen.
    avx512: bool,
}

impl LayerNorm {
    /// Scale `gamma` and shift `beta` (of the same length) and the variance floor `eps`; in
    /// AVX-512 if `allow_avx512` and the CPU has it.
    pub(super) fn new(gamma: Vec<f32>, beta: Vec<f32>, eps: f32, allow_avx512: bool) -> Self {
        #[cfg(target_arch = "x86_64")]
        let avx512 = allow_avx512
            && std::arch::is_x86_feature_detected!("avx512f")
            && gamma.len().is_multiple_of(16)
            && gamma.len() == beta.len();
        #[cfg(not(target_arch = "x86_64"))]
        let avx512 = {
            let _ = allow_avx512;
            false
        };
        Self {
            gamma,
            beta,
            eps,
            avx512,
        }
    }

    /// Adds `residual` (the same shape as `rows`), if given, to `rows`, then normalises each
    /// row in place.
    ///
    /// # Panics
    /// If `residual` is not as long as `rows` (a bug in the caller, not an input).
    pub(super) fn apply(&self, rows: &mut [f32], residual: Option<&[f32]>) {
        assert!(residual.is_none_or(|residual| residual.len() == rows.len()));
        #[cfg(target_arch = "x86_64")]
        if self.avx512 {
            // SAFETY: `avx512` is only set when the CPU has AVX-512F and `gamma` and `beta` hold
            // the same multiple of sixteen values; the residual's length was asserted above.
            unsafe { self.apply_avx512(rows, residual) };
            return;
        }
        self.apply_portable(rows, residual);
    }

    /// One value at a time: the reference the AVX-512 version is tested against.
    fn apply_portable(&self, rows: &mut [f32], residual: Option<&[f32]>) {
        let width = self.gamma.len();
        if let Some(residual) = residual {
            for (value, residual) in rows.iter_mut().zip(residual) {
                *value += residual;
            }
        }
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

    /// # Safety
    /// The CPU has AVX-512F; `gamma` and `beta` hold the same multiple of sixteen values;
    /// `residual`, if given, is as long as `rows`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn apply_avx512(&self, rows: &mut [f32], residual: Option<&[f32]>) {
        let width = self.gamma.len();
        let (gamma, beta) = (self.gamma.as_ptr(), self.beta.as_ptr());
        for (row_idx, row) in rows.chunks_exact_mut(width).enumerate() {
            let at = row.as_mut_ptr();
            let residual = residual.map(|residual| residual[row_idx * width..][..width].as_ptr());
            let mut sum = _mm512_setzero_ps();
            for column in (0..width).step_by(16) {
                // SAFETY: `column + 16 <= width`, the length of the row, of the residual's row
                // (bounds-checked above) and of `gamma` and `beta`.
                unsafe {
                    let mut value = _mm512_loadu_ps(at.add(column));
                    if let Some(residual) = residual {
                        value = _mm512_add_ps(value, _mm512_loadu_ps(residual.add(column)));
                        _mm512_storeu_ps(at.add(column), value);
                    }
                    sum = _mm512_add_ps(sum, value);
                }
            }
            let mean = _mm512_set1_ps(_mm512_reduce_add_ps(sum) / width as f32);
            let mut squares = _mm512_setzero_ps();
            for column in (0..width).step_by(16) {
                // SAFETY: as above.
                let centred = _mm512_sub_ps(unsafe { _mm512_loadu_ps(at.add(column)) }, mean);
                squares = _mm512_fmadd_ps(centred, centred, squares);
            }
            let variance = _mm512_reduce_add_ps(squares) / width as f32;
            let inverse = _mm512_set1_ps(1.0 / (variance + self.eps).sqrt());
            for column in (0..width).step_by(16) {
                // SAFETY: as above.
                unsafe {
                    let centred = _mm512_sub_ps(_mm512_loadu_ps(at.add(column)), mean);
                    let gamma = _mm512_loadu_ps(gamma.add(column));
                    let scaled = _mm512_mul_ps(_mm512_mul_ps(centred, inverse), gamma);
                    let value = _mm512_add_ps(scaled, _mm512_loadu_ps(beta.add(column)));
                    _mm512_storeu_ps(at.add(column), value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LayerNorm;

    /// Deterministic values in [-3, 3).
    fn values(count: usize, seed: u64) -> Vec<f32> {
        super::super::pseudo_random(count, seed, 3.0)
    }

    #[test]
    fn the_avx512_layer_norm_matches_the_portable_one() {
        for width in [384, 48, 20] {
            let norm = LayerNorm::new(values(width, 1), values(width, 2), 1e-12, true);
            if !norm.avx512 {
                eprintln!("width {width}: the portable version only");
                continue;
            }
            let rows = values(7 * width, 3);
            let residual = values(7 * width, 4);
            for residual in [None, Some(&residual[..])] {
                let mut expected = rows.clone();
                norm.apply_portable(&mut expected, residual);
                let mut got = rows.clone();
                norm.apply(&mut got, residual);
                for (index, (got, expected)) in got.iter().zip(&expected).enumerate() {
                    assert!(
                        (got - expected).abs() < 1e-5,
                        "width {width} [{index}]: {got} vs {expected}"
                    );
                }
            }
        }
    }
}
