//! The developer tools of the `mnemo` binary: `bench` and `eval` (users measure their own data
//! with them), `eval-screening` (the poisoning screen on labelled texts), `replay` and `demo`
//! (scenarios through the replay harness), and the registry they replay on, which adds the
//! example `notes` extension to the built-in ones.
//!
//! The binary parses the arguments and calls [`bench::run`], [`eval::run`], [`replay::run`] or
//! [`replay::demo`]. [`progress`] is the live progress bar of its long commands on a terminal.

pub mod bench;
pub mod bench_http;
mod embedding_speed;
pub mod eval;
pub mod progress;
pub mod replay;
pub mod screening_eval;

use mnemo_kernel::host::ExtensionRegistry;

/// The built-in extensions plus the example `notes` extension (`examples/notes`), which the
/// demo, sample scenarios and tests switch on; the product's own registry does not know it.
pub fn dev_extensions() -> ExtensionRegistry {
    mnemo_host::builtin_extensions().with(mnemo_example_notes::factory())
}
