//! API keys and store settings in PostgreSQL: the shared statements of `store/api_keys.rs`, each
//! in its own transaction (a key is nobody's memory, so no owner's writer waits for it).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Postgres;

use super::PostgresStore;
use crate::error::Result;
use crate::store::api_keys;
use crate::store::backend::KeyRecords;
use crate::store::KeyRecord;

#[async_trait]
impl KeyRecords for PostgresStore {
    async fn insert_key(&self, key: &KeyRecord) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let inserted = api_keys::insert_key::<Postgres>(key)?
            .build()
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(inserted)
    }

    async fn keys(&self, id: Option<&str>) -> Result<Vec<KeyRecord>> {
        let rows = api_keys::select_keys::<Postgres>(id)
            .build()
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(api_keys::key_from_row).collect()
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<Option<KeyRecord>> {
        let mut tx = self.pool.begin().await?;
        api_keys::revoke_key::<Postgres>(id, at)
            .build()
            .execute(&mut *tx)
            .await?;
        let row = api_keys::select_keys::<Postgres>(Some(id))
            .build()
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        row.as_ref().map(api_keys::key_from_row).transpose()
    }

    async fn setting(&self, name: &str) -> Result<Option<String>> {
        Ok(api_keys::select_setting::<Postgres>(name)
            .build_query_scalar()
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn set_setting(&self, name: &str, value: &str) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let set = api_keys::insert_setting::<Postgres>(name, value)
            .build()
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(set)
    }
}
