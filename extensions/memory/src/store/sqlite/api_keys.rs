//! API keys and store settings in SQLite: the shared statements of `store/api_keys.rs`, run
//! under the store's write lock.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Sqlite;

use super::MemoryStore;
use crate::error::Result;
use crate::store::api_keys;
use crate::store::backend::KeyRecords;
use crate::store::KeyRecord;

#[async_trait]
impl KeyRecords for MemoryStore {
    async fn insert_key(&self, key: &KeyRecord) -> Result<bool> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let inserted = api_keys::insert_key::<Sqlite>(key)?
            .build()
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(inserted)
    }

    async fn keys(&self, id: Option<&str>) -> Result<Vec<KeyRecord>> {
        let rows = api_keys::select_keys::<Sqlite>(id)
            .build()
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(api_keys::key_from_row).collect()
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<Option<KeyRecord>> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        api_keys::revoke_key::<Sqlite>(id, at)
            .build()
            .execute(&mut *tx)
            .await?;
        let row = api_keys::select_keys::<Sqlite>(Some(id))
            .build()
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        row.as_ref().map(api_keys::key_from_row).transpose()
    }

    async fn setting(&self, name: &str) -> Result<Option<String>> {
        Ok(api_keys::select_setting::<Sqlite>(name)
            .build_query_scalar()
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn set_setting(&self, name: &str, value: &str) -> Result<bool> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let set = api_keys::insert_setting::<Sqlite>(name, value)
            .build()
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(set)
    }
}
