//! What instances sharing one database must not both do: a scheduled run is claimed by one of
//! them (the first to insert its row in `job_runs`), and a session's consolidation is leased to
//! one of them at a time.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::{JobRecords, SessionLeases, JOB_CLAIMS_KEPT_SECS};
use crate::store::job_history;
use crate::store::rows::job_run_from_row;
use crate::store::sql::chat_key;
use crate::store::sql::WriteScope;
use crate::types::SessionKey;
use mnemo_kernel::host::JobRun;
use sqlx::Postgres;

#[async_trait]
impl JobRecords for PostgresStore {
    async fn record_job_run(&self, run: &JobRun) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        job_history::insert_run::<Postgres>(run)
            .build()
            .execute(&mut *tx)
            .await?;
        job_history::prune_runs::<Postgres>()
            .build()
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn recent_job_runs(&self, limit: usize) -> Result<Vec<JobRun>> {
        let rows = job_history::recent_runs::<Postgres>(limit)
            .build()
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(job_run_from_row).collect()
    }

    async fn claim_job_run(
        &self,
        job: &str,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM job_runs WHERE due_at < $1")
            .bind(due.timestamp() - JOB_CLAIMS_KEPT_SECS)
            .execute(&mut *tx)
            .await?;
        // The primary key decides: of instances inserting at once, one inserts and the others
        // wait for it, then find the row and insert nothing.
        let claimed = sqlx::query(
            "INSERT INTO job_runs (job, due_at, claimed_at) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING",
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
impl SessionLeases for PostgresStore {
    async fn lease_session(
        &self,
        session: &SessionKey,
        holder: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let mut tx = self
            .begin_write(WriteScope::Owner(&session.user_id))
            .await?;
        let leased = sqlx::query(
            "UPDATE sessions_consolidations SET leased_by = $1, leased_until = $2 \
             WHERE user_id = $3 AND chat_id = $4 AND session_id = $5 \
             AND (leased_until IS NULL OR leased_until < $6 OR leased_by = $1)",
        )
        .bind(holder)
        .bind(until.timestamp())
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .bind(now.timestamp())
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        let recorded = leased
            || sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM sessions_consolidations \
                 WHERE user_id = $1 AND chat_id = $2 AND session_id = $3",
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
        let mut tx = self
            .begin_write(WriteScope::Owner(&session.user_id))
            .await?;
        sqlx::query(
            "UPDATE sessions_consolidations SET leased_by = NULL, leased_until = NULL \
             WHERE user_id = $1 AND chat_id = $2 AND session_id = $3 AND leased_by = $4",
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
