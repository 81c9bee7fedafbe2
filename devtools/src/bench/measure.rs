//! What the bench reports measurements with: percentiles of latencies, the median over
//! rounds, peak memory and database size.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

pub(crate) fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

pub(crate) fn ms(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1_000_000.0).round() / 1_000.0
}

/// p50, p95 and p99 of `latencies` in milliseconds.
pub(crate) fn summary(latencies: &mut [Duration]) -> serde_json::Value {
    latencies.sort();
    json!({
        "p50": ms(percentile(latencies, 0.5)),
        "p95": ms(percentile(latencies, 0.95)),
        "p99": ms(percentile(latencies, 0.99)),
    })
}

/// The median over rounds of each percentile.
pub(super) fn median_summary(rounds: &[serde_json::Value]) -> serde_json::Value {
    let mut object = serde_json::Map::new();
    for key in ["p50", "p95", "p99"] {
        let mut values: Vec<f64> = rounds
            .iter()
            .filter_map(|round| round[key].as_f64())
            .collect();
        values.sort_by(f64::total_cmp);
        object.insert(
            key.to_owned(),
            json!(values.get(values.len() / 2).copied().unwrap_or_default()),
        );
    }
    serde_json::Value::Object(object)
}

/// Peak resident memory of this process, from /proc (0 where unavailable).
pub(super) fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Bytes of the database files (main file and write-ahead log) in `dir`.
pub(super) fn database_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.file_name().to_string_lossy().contains(".db"))
                .filter_map(|entry| entry.metadata().ok())
                .map(|metadata| metadata.len())
                .sum()
        })
        .unwrap_or(0)
}
