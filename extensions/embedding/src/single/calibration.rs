//! Which matrix product this CPU runs fastest, measured once per process.
//!
//! A CPU flag says only that an instruction can run, not at what rate. On this project's CI
//! machine, with the same CPU flags under KVM, a register-only loop of `vdpbf16ps` reached 274 G
//! multiply-adds/s on 2026-11-25 and 42 G on 2026-11-27, half of `vfmadd231ps`'s multiply-adds
//! that day (a quarter of its instructions); the bfloat16 product went from 1.6 times the
//! half-precision one to 1.4 times slower. So
//! the first load times every product the CPU has on a model-shaped matrix and keeps the
//! fastest.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{Kernels, Linear, Precision, RoundedInputs};

/// Token rows, inputs and outputs of the timed product: a short text through a 384-wide layer.
const ROWS: usize = 32;
const IN_DIM: usize = 384;
const OUT_DIM: usize = 384;
/// Timed runs of each product, interleaved; the fastest run of each counts.
const RUNS: usize = 7;
/// How much faster a product must be to replace one closer to the reference (lowest cosine
/// with sentence-transformers: half precision widened to f32 0.9999993, half-precision
/// arithmetic 0.99999, bfloat16 0.99994, the same in AMX tiles), so that a tie goes to the
/// closer one.
const MARGIN: f64 = 1.1;
/// The products in order of closeness to the reference.
const BY_FIDELITY: [Precision; 4] = [
    Precision::Half,
    Precision::NativeHalf,
    Precision::Brain,
    Precision::Tiles,
];

/// The products this CPU runs, in [`BY_FIDELITY`] order.
fn available_products() -> Vec<Precision> {
    BY_FIDELITY
        .into_iter()
        .filter(|precision| precision.available())
        .collect()
}

/// The fastest run of each product this CPU has, in [`BY_FIDELITY`] order.
#[derive(Debug, Clone)]
pub(super) struct Timing(pub(super) Vec<(Precision, Duration)>);

impl Timing {
    /// The product to use: the closest to the reference of those within [`MARGIN`] of the
    /// fastest.
    pub(super) fn choice(&self) -> Precision {
        let Some(fastest) = self.0.iter().map(|&(_, took)| took).min() else {
            return Precision::Half;
        };
        self.0
            .iter()
            .find(|&&(_, took)| took.as_secs_f64() <= fastest.as_secs_f64() * MARGIN)
            .map_or(Precision::Half, |&(precision, _)| precision)
    }
}

/// The products the forward should use here. Measured on the first call (a few milliseconds)
/// and remembered for the process.
pub(super) fn fastest_precision() -> Precision {
    static CHOICE: OnceLock<Precision> = OnceLock::new();
    *CHOICE.get_or_init(|| {
        let available = available_products();
        if available.len() < 2 {
            return available.first().copied().unwrap_or(Precision::Half);
        }
        let timing = time_products();
        let rate = |took: Duration| {
            format!(
                "{:.1}",
                (ROWS * IN_DIM * OUT_DIM) as f64 / took.as_secs_f64().max(1e-9) / 1e9
            )
        };
        let chosen = timing.choice();
        let gmacs: Vec<String> = timing
            .0
            .iter()
            .map(|&(precision, took)| format!("{precision:?} {}", rate(took)))
            .collect();
        tracing::info!(
            gmacs = gmacs.join(", "),
            chosen = ?chosen,
            "embedding products timed on this CPU"
        );
        chosen
    })
}

/// The timed matrix's input, and its layer packed for each product this CPU has.
fn timed_layers() -> (Vec<f32>, Vec<(Precision, Linear)>) {
    let weight = super::pseudo_random(IN_DIM * OUT_DIM, 0x9e37_79b9, 1.0);
    let input = super::pseudo_random(ROWS * IN_DIM, 0x85eb_ca6b, 1.0);
    let layers = available_products()
        .into_iter()
        .map(|precision| {
            let kernels = Kernels {
                precision,
                avx512: true,
            };
            let layer = Linear::new(weight.clone(), vec![0.0; OUT_DIM], IN_DIM, OUT_DIM, kernels);
            (precision, layer)
        })
        .collect();
    (input, layers)
}

/// Each product's output on the timed matrix, for the tests.
#[cfg(test)]
fn timed_outputs() -> Vec<(Precision, Vec<f32>)> {
    let (input, layers) = timed_layers();
    let mut rounded = RoundedInputs::default();
    layers
        .iter()
        .map(|(precision, layer)| {
            let mut output = Vec::new();
            layer.forward(&input, &mut output, &mut rounded);
            (*precision, output)
        })
        .collect()
}

/// The fastest of [`RUNS`] interleaved runs of each product this CPU has, after one warm-up
/// run of each.
pub(super) fn time_products() -> Timing {
    let (input, layers) = timed_layers();
    let mut output = Vec::new();
    let mut rounded = RoundedInputs::default();
    let mut fastest = vec![Duration::MAX; layers.len()];
    for run in 0..=RUNS {
        for ((_, layer), fastest) in layers.iter().zip(&mut fastest) {
            let start = Instant::now();
            layer.forward(&input, &mut output, &mut rounded);
            let took = start.elapsed();
            if run > 0 {
                *fastest = (*fastest).min(took);
            }
        }
    }
    Timing(
        layers
            .iter()
            .map(|(precision, _)| *precision)
            .zip(fastest)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::{Duration, Precision, Timing};

    fn timing(micros: &[(Precision, u64)]) -> Timing {
        Timing(
            micros
                .iter()
                .map(|&(precision, micros)| (precision, Duration::from_micros(micros)))
                .collect(),
        )
    }

    #[test]
    fn a_tie_goes_to_the_product_closer_to_the_reference() {
        use Precision::{Brain, Half, NativeHalf};
        assert_eq!(timing(&[(Half, 100)]).choice(), Half);
        assert_eq!(timing(&[(Half, 100), (Brain, 100)]).choice(), Half);
        assert_eq!(timing(&[(Half, 100), (Brain, 95)]).choice(), Half);
        assert_eq!(timing(&[(Half, 100), (Brain, 140)]).choice(), Half);
        assert_eq!(timing(&[(Half, 100), (Brain, 60)]).choice(), Brain);
        assert_eq!(
            timing(&[(Half, 100), (NativeHalf, 50), (Brain, 48)]).choice(),
            NativeHalf
        );
        assert_eq!(
            timing(&[(Half, 100), (NativeHalf, 50), (Brain, 40)]).choice(),
            Brain
        );
        assert_eq!(
            timing(&[(Half, 100), (NativeHalf, 95), (Brain, 140)]).choice(),
            Half
        );
        // Within the margin of the fastest, the closer product wins, whatever lies between.
        assert_eq!(
            timing(&[(Half, 100), (NativeHalf, 95), (Brain, 88)]).choice(),
            NativeHalf
        );
        assert_eq!(timing(&[(NativeHalf, 50)]).choice(), NativeHalf);
    }

    #[test]
    fn every_product_the_cpu_has_is_timed_and_computes_the_same_layer() {
        let timing = super::time_products();
        let timed: Vec<Precision> = timing.0.iter().map(|&(precision, _)| precision).collect();
        assert_eq!(timed, super::available_products());
        // A product is only worth its speed if it computes the layer: each against half
        // precision widened to f32, on the timed matrix.
        let outputs = super::timed_outputs();
        let Some((_, reference)) = outputs.first() else {
            return;
        };
        for (precision, output) in &outputs {
            let worst = output
                .iter()
                .zip(reference)
                .map(|(got, expected)| (got - expected).abs())
                .fold(0.0f32, f32::max);
            // Sums of 384 products of values in [-1, 1]: bfloat16 rounding errs by about 0.1.
            assert!(worst < 0.25, "{precision:?} is off by {worst}");
            assert!(output.iter().all(|value| value.is_finite()));
        }
    }
}
