//! What the kernel-level tests of this crate share: a kernel with only this extension, on a
//! virtual clock and a scripted model, and announcing another extension's event.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use mnemo_kernel::host::{Config, ExtensionRegistry, Kernel, ScriptedLlm};
use mnemo_kernel::{Event, EventPayload, LlmClient};
use serde_json::Value;

pub(crate) fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

/// A kernel with markdown_memory alone, from `config`, starting at 2026-03-02 09:00 UTC.
pub(crate) async fn start(config: &str, dir: &Path, llm: Arc<ScriptedLlm>) -> Kernel {
    let config = Config::parse(config, "test.toml").unwrap();
    Kernel::builder(
        ExtensionRegistry::new().with(mnemo_markdown_memory::factory()),
        config,
    )
    .virtual_clock(at("2026-03-02T09:00:00Z"))
    .llm(llm as Arc<dyn LlmClient>)
    .data_dir(dir)
    .start()
    .await
    .unwrap()
}

/// Publishes another extension's event (`memory.forgotten`, `memory.user_erased`) and waits for
/// it to be handled.
pub(crate) async fn announce(kernel: &Kernel, topic: &str, data: Value) {
    let payload = EventPayload::Custom {
        topic: topic.into(),
        data,
    };
    kernel
        .publish(Event::new(kernel.context().now(), payload))
        .await
        .unwrap();
    kernel.settle().await;
}

/// The messages of a session buffer's text: every line but its first, the session's metadata
/// (`{"_type":"metadata","created_at":…}`), which must be there.
pub(crate) fn buffered(text: &str) -> Vec<&str> {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    assert!(
        first.starts_with("{\"_type\":\"metadata\",\"created_at\":"),
        "a buffer starts with its metadata: {text}"
    );
    lines.collect()
}
