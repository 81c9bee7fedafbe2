//! The registry of built-in extensions and the embedded default configuration: what the `mnemo`
//! binary hosts.
//!
//! A host of one's own builds a [`mnemo_kernel::KernelBuilder`] from [`builtin_extensions`] plus
//! its own factories.

use mnemo_kernel::ExtensionRegistry;

/// The default `config.toml`, used when no config file is given or found.
pub const DEFAULT_CONFIG: &str = include_str!("../../config.toml");

/// Every extension the `mnemo` binary ships, keyed by config name.
pub fn builtin_extensions() -> ExtensionRegistry {
    ExtensionRegistry::new()
        .with(mnemo_memory::factory())
        .with(mnemo_memory_maintenance::factory())
        .with(mnemo_memory_reflection::factory())
        .with(mnemo_embedding::factory())
        .with(mnemo_ner::factory())
        .with(mnemo_markdown_memory::factory())
}
