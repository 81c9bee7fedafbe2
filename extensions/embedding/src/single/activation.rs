//! Element-wise functions of the forward pass in AVX-512: the softmax's `exp`.
//!
//! libm's scalar `exp` took a twentieth of a 200-token forward pass. This one computes sixteen
//! values at a time with Cephes' `expf` polynomial (about 1 ulp) and `vscalefps` for the power
//! of two.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Replaces each score by `exp(score - max)` and returns their sum: a softmax without its
/// division.
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn softmax_numerators_avx512(scores: &mut [f32]) -> f32 {
    let (chunks, tail) = scores.as_chunks_mut::<16>();
    let tail_mask: __mmask16 = (1u32 << tail.len()).wrapping_sub(1) as __mmask16;
    let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
    for chunk in chunks.iter() {
        // SAFETY: a chunk holds sixteen values.
        max = _mm512_max_ps(max, unsafe { _mm512_loadu_ps(chunk.as_ptr()) });
    }
    // SAFETY: the mask covers only the tail's `tail.len()` values.
    let last = unsafe { _mm512_mask_loadu_ps(max, tail_mask, tail.as_ptr()) };
    let max = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(max, last)));
    let mut sum = _mm512_setzero_ps();
    for chunk in chunks.iter_mut() {
        // SAFETY: a chunk holds sixteen values.
        unsafe {
            let value = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(chunk.as_ptr()), max));
            _mm512_storeu_ps(chunk.as_mut_ptr(), value);
            sum = _mm512_add_ps(sum, value);
        }
    }
    // SAFETY: the mask covers only the tail's values; masked-off lanes load as zero and are
    // neither stored nor summed.
    unsafe {
        let value = exp_avx512(_mm512_sub_ps(
            _mm512_maskz_loadu_ps(tail_mask, tail.as_ptr()),
            max,
        ));
        _mm512_mask_storeu_ps(tail.as_mut_ptr(), tail_mask, value);
        sum = _mm512_mask_add_ps(sum, tail_mask, sum, value);
    }
    _mm512_reduce_add_ps(sum)
}

/// `exp` of sixteen values, with Cephes' `expf`: `x = n·ln 2 + r`, a degree-6 polynomial in
/// `r`, scaled by `2ⁿ`. Inputs are clamped to where f32 `exp` is finite and non-zero.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn exp_avx512(x: __m512) -> __m512 {
    let x = _mm512_min_ps(
        _mm512_max_ps(x, _mm512_set1_ps(-87.336_55)),
        _mm512_set1_ps(88.376_26),
    );
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E)),
    );
    // ln 2 in two parts, so that `n·ln 2` is exact enough.
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693_359_4), x);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm512_set1_ps(1.987_569_1e-4);
    for coefficient in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(coefficient));
    }
    let r2 = _mm512_mul_ps(r, r);
    let y = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0));
    _mm512_scalef_ps(y, n)
}

#[cfg(test)]
mod tests {

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx512_softmax_matches_exp() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: this CPU lacks AVX-512F, so the path is never taken");
            return;
        }
        for length in [1, 15, 16, 17, 100, 256] {
            let scores: Vec<f32> = (0..length)
                .map(|index| ((index * 37) % 101) as f32 * 0.37 - 20.0)
                .collect();
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let expected: Vec<f64> = scores
                .iter()
                .map(|score| f64::from(score - max).exp())
                .collect();
            let mut got = scores.clone();
            // SAFETY: the CPU has AVX-512F (checked above).
            let sum = unsafe { super::softmax_numerators_avx512(&mut got) };
            for (got, expected) in got.iter().zip(&expected) {
                let error = (f64::from(*got) - expected).abs();
                assert!(error <= 3e-7 * expected, "{got} vs {expected}");
            }
            let total: f64 = expected.iter().sum();
            assert!(
                (f64::from(sum) - total).abs() <= 1e-6 * total,
                "{sum} vs {total}"
            );
        }
    }
}
