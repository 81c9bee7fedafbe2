//! The `mnemo` host: the registry of built-in extensions and the embedded default configuration.
//!
//! The binary (`src/main.rs`) is the command line around this. A host of one's own builds a
//! [`mnemo_kernel::host::KernelBuilder`] from [`builtin_extensions`] plus its own factories.

use mnemo_kernel::host::ExtensionRegistry;

/// The default `config.toml`, used when no config file is given or found.
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// The scenario `mnemo demo` replays.
pub const DEMO_SCENARIO: &str = include_str!("demo.jsonl");

/// Every extension the `mnemo` binary knows, keyed by config name.
///
/// `notes` is the example third-party extension from `examples/notes`: it is linked here so the
/// demo and the sample scenarios can switch it on, and it is disabled in the default config.
pub fn builtin_extensions() -> ExtensionRegistry {
    ExtensionRegistry::new()
        .with(mnemo_memory::factory())
        .with(mnemo_memory_maintenance::factory())
        .with(mnemo_memory_reflection::factory())
        .with(mnemo_embedding::factory())
        .with(mnemo_ner::factory())
        .with(mnemo_markdown_memory::factory())
        .with(mnemo_example_notes::factory())
}
