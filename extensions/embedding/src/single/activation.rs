//! The element-wise functions of the forward pass: the hidden activation (GELU) and the
//! softmax's `exp`, in plain Rust and in AVX-512.
//!
//! libm's scalar `erf` and `exp` took a fifth of a 200-token forward pass. The AVX-512 versions
//! compute sixteen values at a time: `exp` with Cephes' `expf` polynomial (about 1 ulp) and
//! `vscalefps` for the power of two; `erf` with Abramowitz and Stegun's formula 7.1.26
//! (absolute error below 1.5e-7), as PyTorch's vectorised CPU `erf` does.

use candle_transformers::models::bert::HiddenAct;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Whether this CPU runs the AVX-512 versions.
pub(super) fn avx512_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Applies the hidden activation to `values` in place, in AVX-512 when `avx512` is set (the
/// caller has checked [`avx512_available`]) and the activation is the exact GELU.
///
/// # Panics
/// If `avx512` is set on a CPU without AVX-512F.
pub(super) fn activate(activation: HiddenAct, values: &mut [f32], avx512: bool) {
    #[cfg(target_arch = "x86_64")]
    if avx512 && activation == HiddenAct::Gelu {
        assert!(avx512_available(), "the AVX-512 GELU needs AVX-512F");
        // SAFETY: the CPU has AVX-512F (asserted just above).
        unsafe { gelu_avx512(values) };
        return;
    }
    let _ = avx512;
    activate_portable(activation, values);
}

/// The hidden activation, as candle's BERT applies it (`gelu` is the exact, erf-based one).
fn activate_portable(activation: HiddenAct, values: &mut [f32]) {
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

/// The exact GELU, `x·(1 + erf(x/√2))/2`, on every value.
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gelu_avx512(values: &mut [f32]) {
    let (chunks, tail) = values.as_chunks_mut::<16>();
    for chunk in chunks {
        // SAFETY: a chunk holds sixteen values.
        unsafe {
            let x = _mm512_loadu_ps(chunk.as_ptr());
            _mm512_storeu_ps(chunk.as_mut_ptr(), gelu16(x));
        }
    }
    let tail_mask: __mmask16 = (1u32 << tail.len()).wrapping_sub(1) as __mmask16;
    // SAFETY: the mask covers only the tail's values.
    unsafe {
        let x = _mm512_maskz_loadu_ps(tail_mask, tail.as_ptr());
        _mm512_mask_storeu_ps(tail.as_mut_ptr(), tail_mask, gelu16(x));
    }
}

/// GELU of sixteen values; `erf(z) = sign(z)·(1 − t·P(t)·e^(−z²))` with `t = 1/(1 + p·|z|)`
/// (Abramowitz and Stegun 7.1.26).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn gelu16(x: __m512) -> __m512 {
    let z = _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::FRAC_1_SQRT_2));
    let sign_bit = _mm512_set1_epi32(i32::MIN);
    let sign = _mm512_and_si512(_mm512_castps_si512(z), sign_bit);
    let magnitude = _mm512_castsi512_ps(_mm512_andnot_si512(sign_bit, _mm512_castps_si512(z)));
    let t = _mm512_div_ps(
        _mm512_set1_ps(1.0),
        _mm512_fmadd_ps(magnitude, _mm512_set1_ps(0.327_591_1), _mm512_set1_ps(1.0)),
    );
    let mut p = _mm512_set1_ps(1.061_405_4);
    for coefficient in [-1.453_152_1, 1.421_413_8, -0.284_496_74, 0.254_829_6] {
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(coefficient));
    }
    let e = exp_avx512(_mm512_mul_ps(
        _mm512_sub_ps(_mm512_setzero_ps(), magnitude),
        magnitude,
    ));
    let erf_magnitude = _mm512_fnmadd_ps(_mm512_mul_ps(p, t), e, _mm512_set1_ps(1.0));
    let erf = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(erf_magnitude), sign));
    _mm512_mul_ps(
        _mm512_mul_ps(_mm512_set1_ps(0.5), x),
        _mm512_add_ps(_mm512_set1_ps(1.0), erf),
    )
}

#[cfg(test)]
mod tests {
    use super::{activate, activate_portable, avx512_available};
    use candle_transformers::models::bert::HiddenAct;

    #[test]
    fn the_avx512_gelu_matches_the_portable_one() {
        if !avx512_available() {
            eprintln!("skipped: this CPU lacks AVX-512F, so the path is never taken");
            return;
        }
        // -12..12 in small steps, plus values where erf saturates; 37 + a ragged tail.
        let mut input: Vec<f32> = (-1200..=1200).map(|step| step as f32 / 100.0).collect();
        input.extend([
            -1e4,
            -90.0,
            -20.0,
            0.0,
            -0.0,
            1e-30,
            20.0,
            90.0,
            1e4,
            f32::MIN_POSITIVE,
        ]);
        let mut expected = input.clone();
        activate_portable(HiddenAct::Gelu, &mut expected);
        let mut got = input.clone();
        activate(HiddenAct::Gelu, &mut got, true);
        let mut worst = 0.0f32;
        for ((x, got), expected) in input.iter().zip(&got).zip(&expected) {
            // Formula 7.1.26's 1.5e-7 on erf, halved and scaled by x, plus f32 rounding.
            let error = (got - expected).abs() / x.abs().max(1.0);
            worst = worst.max(error);
            assert!(error <= 3e-7, "gelu({x}): {got} vs {expected}");
        }
        eprintln!("largest GELU difference: {worst:e} × max(|x|, 1)");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx512_softmax_matches_exp() {
        if !avx512_available() {
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
