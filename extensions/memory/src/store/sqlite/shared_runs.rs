//! What processes sharing one SQLite file must not both do: a scheduled run is claimed by one
//! of them (`job_runs`), and a session's consolidation is leased to one of them at a time.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::{JobRecords, SessionLeases, JOB_CLAIMS_KEPT_SECS};
use crate::store::job_history;
use crate::store::rows::job_run_from_row;
use crate::store::sql::chat_key;
use crate::types::SessionKey;
use mnemo_kernel::host::JobRun;
use sqlx::Sqlite;

#[async_trait]
impl JobRecords for MemoryStore {
    async fn record_job_run(&self, run: &JobRun) -> Result<()> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        job_history::insert_run::<Sqlite>(run)
            .build()
            .execute(&mut *tx)
            .await?;
        job_history::prune_runs::<Sqlite>()
            .build()
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn recent_job_runs(&self, limit: usize) -> Result<Vec<JobRun>> {
        let rows = job_history::recent_runs::<Sqlite>(limit)
            .build()
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(job_run_from_row).collect()
    }

    async fn claim_job_run(
        &self,
        job: &str,
        due: chrono::DateTime<chrono::Utc>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM job_runs WHERE due_at < ?")
            .bind(due.timestamp() - JOB_CLAIMS_KEPT_SECS)
            .execute(&mut *tx)
            .await?;
        let claimed = sqlx::query(
            "INSERT OR IGNORE INTO job_runs (job, due_at, claimed_at) VALUES (?, ?, ?)",
        )
        .bind(job)
        .bind(due.timestamp())
        .bind(now.timestamp())
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(claimed)
    }
}

#[async_trait]
impl SessionLeases for MemoryStore {
    async fn lease_session(
        &self,
        session: &SessionKey,
        holder: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let leased = sqlx::query(
            "UPDATE sessions_consolidations SET leased_by = ?, leased_until = ? \
             WHERE user_id = ? AND chat_id = ? AND session_id = ? \
             AND (leased_until IS NULL OR leased_until < ? OR leased_by = ?)",
        )
        .bind(holder)
        .bind(until.timestamp())
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .bind(now.timestamp())
        .bind(holder)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        let recorded = leased
            || sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM sessions_consolidations \
                 WHERE user_id = ? AND chat_id = ? AND session_id = ?",
            )
            .bind(&session.user_id)
            .bind(chat_key(session.chat_id.as_deref()))
            .bind(&session.session_id)
            .fetch_one(&mut *tx)
            .await?
                > 0;
        tx.commit().await?;
        Ok(leased || !recorded)
    }

    async fn release_session(&self, session: &SessionKey, holder: &str) -> Result<()> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE sessions_consolidations SET leased_by = NULL, leased_until = NULL \
             WHERE user_id = ? AND chat_id = ? AND session_id = ? AND leased_by = ?",
        )
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .bind(holder)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
