//! Which matrix product this CPU runs faster, measured once per process.
//!
//! A CPU that reports AVX512_BF16 does not always run `vdpbf16ps` at the rate the flag
//! promises. On this project's CI machine, with the same CPU flags under KVM, a register-only
//! loop of it reached 274 G multiply-adds/s on 2026-11-25 and 42 G on 2026-11-27, a quarter of
//! `vfmadd`'s rate that day; the bfloat16 product went from 1.6 times the half-precision one
//! to 1.4 times slower. So the flag says only that the product can run, and a short timing of
//! both products on a model-shaped matrix says which one to use.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{gemm, gemm_bf16};

/// Token rows, inputs and outputs of the timed product: a short text through a 384-wide layer.
const ROWS: usize = 32;
const IN_DIM: usize = 384;
const OUT_DIM: usize = 384;
/// Timed runs of each product, interleaved; the fastest run of each counts.
const RUNS: usize = 7;
/// How much faster the bfloat16 product must be to be chosen: the half-precision one is closer
/// to the reference (lowest cosine 0.9999993 against 0.99994), so a tie goes to it.
const MARGIN: f64 = 1.1;

/// The two products' fastest runs on the timed matrix.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    pub(super) half: Duration,
    pub(super) brain: Duration,
}

impl Timing {
    /// Whether the bfloat16 product beats the half-precision one by [`MARGIN`].
    pub(super) fn prefers_brain(&self) -> bool {
        self.brain.as_secs_f64() * MARGIN < self.half.as_secs_f64()
    }
}

/// Whether bfloat16 products are worth using here: the CPU has them and they measured faster.
/// Measured on the first call (a few milliseconds) and remembered for the process.
pub(super) fn brain_is_faster() -> bool {
    static CHOICE: OnceLock<bool> = OnceLock::new();
    *CHOICE.get_or_init(|| {
        if !gemm_bf16::available() || !super::cpu_supported() {
            return false;
        }
        let timing = time_products();
        let rate =
            |took: Duration| (ROWS * IN_DIM * OUT_DIM) as f64 / took.as_secs_f64().max(1e-9) / 1e9;
        let brain = timing.prefers_brain();
        tracing::info!(
            bf16_gmacs = format!("{:.1}", rate(timing.brain)),
            f16_gmacs = format!("{:.1}", rate(timing.half)),
            products = if brain { "bf16" } else { "f16" },
            "embedding products timed on this CPU"
        );
        brain
    })
}

/// The fastest of [`RUNS`] interleaved runs of each product, after one warm-up run of each.
///
/// # Panics
/// If the CPU lacks AVX512_BF16 or the half-precision path's features (callers check).
pub(super) fn time_products() -> Timing {
    let weight = super::pseudo_random(IN_DIM * OUT_DIM, 0x9e37_79b9, 1.0);
    let input = super::pseudo_random(ROWS * IN_DIM, 0x85eb_ca6b, 1.0);
    let bias = vec![0.0f32; OUT_DIM];
    let half = gemm::pack(&weight, IN_DIM, OUT_DIM);
    let brain = gemm_bf16::pack(&weight, IN_DIM, OUT_DIM);
    let path = gemm::best_path();
    let mut output = vec![0.0f32; ROWS * OUT_DIM];
    let mut rounded = Vec::new();
    let mut timing = Timing {
        half: Duration::MAX,
        brain: Duration::MAX,
    };
    for run in 0..=RUNS {
        let start = Instant::now();
        gemm::linear(path, &input, &half, &bias, IN_DIM, OUT_DIM, &mut output);
        let half_took = start.elapsed();
        let start = Instant::now();
        gemm_bf16::linear(
            &input,
            &brain,
            &bias,
            IN_DIM,
            OUT_DIM,
            &mut output,
            &mut rounded,
        );
        let brain_took = start.elapsed();
        if run > 0 {
            timing.half = timing.half.min(half_took);
            timing.brain = timing.brain.min(brain_took);
        }
    }
    timing
}

#[cfg(test)]
mod tests {
    use super::{Duration, Timing};

    #[test]
    fn a_tie_goes_to_half_precision_and_a_clear_win_to_bfloat16() {
        let timing = |half, brain| Timing {
            half: Duration::from_micros(half),
            brain: Duration::from_micros(brain),
        };
        assert!(!timing(100, 100).prefers_brain());
        assert!(!timing(100, 95).prefers_brain());
        assert!(!timing(100, 140).prefers_brain());
        assert!(timing(100, 60).prefers_brain());
    }

    #[test]
    fn both_products_are_timed_where_the_cpu_has_them() {
        if !super::gemm_bf16::available() || !super::super::cpu_supported() {
            eprintln!("skipped: this CPU lacks AVX512_BF16");
            return;
        }
        let timing = super::time_products();
        assert!(timing.half > Duration::ZERO && timing.half < Duration::from_secs(1));
        assert!(timing.brain > Duration::ZERO && timing.brain < Duration::from_secs(1));
    }
}
