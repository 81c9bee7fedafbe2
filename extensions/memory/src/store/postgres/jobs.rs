//! Scheduled runs claimed across instances: the first instance to insert a run's row runs it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::{JobRecords, JOB_CLAIMS_KEPT_SECS};

#[async_trait]
impl JobRecords for PostgresStore {
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
