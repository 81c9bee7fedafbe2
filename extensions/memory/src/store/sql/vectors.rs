//! The parts of the vector index that read the same in both backends: the embedding provider
//! recorded in `memory_metadata`, what a provider finds recorded there, and a search's filters
//! by owner and kind. The vector tables,
//! their indexes and the searches stay with each backend (`store/*/vectors.rs`): SQLite's
//! sqlite-vec table with its in-memory mirror, PostgreSQL's pgvector table with HNSW indexes.

use sqlx::QueryBuilder;

use super::{Bind, Dialect, Driver};
use crate::error::Result;
use crate::store::VectorStatus;

/// Appends ` AND user_id = owner` and ` AND kind = kind`, for those given: a nearest-neighbour
/// search's filters on the vector table's own columns.
pub(crate) fn push_owner_and_kind<D: Driver>(
    builder: &mut QueryBuilder<D>,
    owner: Option<&str>,
    kind: Option<&str>,
) {
    if let Some(owner) = owner {
        builder.push(" AND user_id = ").text(owner);
    }
    if let Some(kind) = kind {
        builder.push(" AND kind = ").text(kind);
    }
}

/// Sets `key` to `value` in `memory_metadata`, on `connection`.
pub(crate) async fn set_metadata<D: Dialect>(
    connection: &mut D::Connection,
    key: &str,
    value: &str,
) -> Result<()> {
    let mut upsert = QueryBuilder::<D>::new("INSERT INTO memory_metadata (key, value) VALUES (");
    upsert
        .text(key)
        .push(", ")
        .text(value)
        .push(") ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value");
    D::execute(connection, upsert).await?;
    Ok(())
}

/// Records the embedding provider of `dimensions`-long vectors of `model_id` in
/// `memory_metadata`, on `connection` inside the caller's transaction.
pub(crate) async fn record_provider<D: Dialect>(
    connection: &mut D::Connection,
    dimensions: usize,
    model_id: &str,
) -> Result<()> {
    set_metadata::<D>(connection, "embedding_dimensions", &dimensions.to_string()).await?;
    set_metadata::<D>(connection, "embedding_model", model_id).await
}

/// What the embedding provider of `dimensions`-long vectors of `model_id` finds recorded in
/// `memory_metadata`, read on `connection`: `None` when no provider is recorded yet; vector
/// search on when the recorded one is this one; else off, saying why.
pub(crate) async fn provider_status<D: Dialect>(
    connection: &mut D::Connection,
    dimensions: usize,
    model_id: &str,
) -> Result<Option<VectorStatus>> {
    let query = QueryBuilder::<D>::new(
        "SELECT key, value FROM memory_metadata \
         WHERE key IN ('embedding_dimensions', 'embedding_model')",
    );
    let (mut stored_dimensions, mut stored_model) = (None, None);
    for row in D::rows(connection, query).await? {
        match D::text(&row, "key")?.as_str() {
            "embedding_dimensions" => stored_dimensions = Some(D::text(&row, "value")?),
            _ => stored_model = Some(D::text(&row, "value")?),
        }
    }
    let Some(stored) = stored_dimensions else {
        return Ok(None);
    };
    let stored_dims: usize = stored.parse().unwrap_or(0);
    let model = stored_model.unwrap_or_default();
    if stored_dims == dimensions && model == model_id {
        return Ok(Some(VectorStatus::Enabled {
            dimensions,
            model_id: model_id.to_owned(),
        }));
    }
    Ok(Some(VectorStatus::Disabled {
        reason: format!(
            "{} holds {stored_dims}-dimension vectors of `{model}`, but the embedding provider \
             gives {dimensions}-dimension vectors of `{model_id}`; vector search is off and \
             search uses {} + entities. Nothing is lost: run `mnemo reindex` to rebuild the \
             vector index for the new model",
            D::VECTORS,
            D::FULL_TEXT
        ),
    }))
}
