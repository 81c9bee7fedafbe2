//! `mnemo migrate-store`: copies a memory store into an empty one, between SQLite and
//! PostgreSQL in either direction, and checks the copy row for row.

use mnemo_devtools::progress::Progress;
use mnemo_memory::{copy_store, StoreLocation};

/// Copies `from` into `to` (both `sqlite:PATH` or `postgres://…`) and reports the rows.
///
/// # Errors
/// A location cannot be read, a store cannot be opened, the target is not empty, or the copy
/// differs from the original.
pub(crate) async fn run(from: &str, to: &str) -> anyhow::Result<bool> {
    let from: StoreLocation = from.parse()?;
    let to: StoreLocation = to.parse()?;
    let mut progress: Option<Progress> = None;
    let report = copy_store(&from, &to, |done, total| {
        progress
            .get_or_insert_with(|| {
                Progress::new(
                    Some(total),
                    "mnemo migrate-store: {wide_bar} {pos}/{len} rows ({elapsed})",
                )
            })
            .set(done);
    })
    .await?;
    drop(progress);
    let tables: Vec<String> = report
        .rows
        .iter()
        .map(|(table, rows)| format!("{table} {rows}"))
        .collect();
    println!(
        "copied {} rows from {from} to {to} and checked them ({}); vectors are rebuilt by the \
         indexer at the next start with an embedding model",
        report.total(),
        tables.join(", ")
    );
    Ok(true)
}
