//! What processes or instances sharing one store must not both do, for both backends: a
//! scheduled run is claimed by one of them (the first to insert its row in `job_runs`), and a
//! session's consolidation is leased to one of them at a time. Also the job history every
//! instance appends to.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_kernel::host::JobRun;
use sqlx::QueryBuilder;

use super::sessions::push_session_key;
use super::{Bind, Driver, Run, SqlStore, WriteScope};
use crate::error::Result;
use crate::store::backend::{JobRecords, SessionLeases, JOB_CLAIMS_KEPT_SECS, JOB_HISTORY_KEPT};
use crate::store::rows::JOB_RUN_COLUMNS;
use crate::types::SessionKey;

#[async_trait]
impl<S: SqlStore> JobRecords for S {
    async fn record_job_run(&self, run: &JobRun) -> Result<()> {
        let (ok, report) = match &run.outcome {
            Ok(report) => (1, report.clone()),
            Err(error) => (0, error.clone()),
        };
        let mut tx = self.write(WriteScope::Keyed).await?;
        let mut insert = QueryBuilder::<S::Db>::new(format!(
            "INSERT INTO job_history ({JOB_RUN_COLUMNS}) VALUES ("
        ));
        insert
            .text(&run.job)
            .push(", ")
            .int(run.at.timestamp_millis())
            .push(", ")
            .int(run.finished_at.timestamp_millis())
            .push(", ")
            .int(ok)
            .push(", ")
            .text(report)
            .push(", ")
            .int(i64::try_from(run.failed_items).unwrap_or(i64::MAX))
            .push(")");
        S::Db::execute(&mut tx, insert).await?;
        // Only the newest JOB_HISTORY_KEPT runs are kept.
        let mut prune = QueryBuilder::<S::Db>::new(
            "DELETE FROM job_history WHERE id <= (SELECT MAX(id) FROM job_history) - ",
        );
        prune.int(JOB_HISTORY_KEPT);
        S::Db::execute(&mut tx, prune).await?;
        tx.commit().await
    }

    async fn recent_job_runs(&self, limit: usize) -> Result<Vec<JobRun>> {
        let mut query = QueryBuilder::<S::Db>::new(format!(
            "SELECT {JOB_RUN_COLUMNS} FROM job_history ORDER BY id DESC LIMIT "
        ));
        query.count(limit);
        self.read(query).await?.iter().map(S::Db::job_run).collect()
    }

    async fn claim_job_run(
        &self,
        job: &str,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let mut tx = self.write(WriteScope::Keyed).await?;
        let mut expired = QueryBuilder::<S::Db>::new("DELETE FROM job_runs WHERE due_at < ");
        expired.int(due.timestamp() - JOB_CLAIMS_KEPT_SECS);
        S::Db::execute(&mut tx, expired).await?;
        // The primary key decides: of instances inserting at once, one inserts and the others
        // wait for it, then find the row and insert nothing.
        let mut claim =
            QueryBuilder::<S::Db>::new("INSERT INTO job_runs (job, due_at, claimed_at) VALUES (");
        claim
            .text(job)
            .push(", ")
            .int(due.timestamp())
            .push(", ")
            .int(now.timestamp())
            .push(") ON CONFLICT DO NOTHING");
        let claimed = S::Db::execute(&mut tx, claim).await? == 1;
        tx.commit().await?;
        Ok(claimed)
    }
}

#[async_trait]
impl<S: SqlStore> SessionLeases for S {
    async fn lease_session(
        &self,
        session: &SessionKey,
        holder: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let mut tx = self.write(WriteScope::Owner(&session.user_id)).await?;
        let mut lease =
            QueryBuilder::<S::Db>::new("UPDATE sessions_consolidations SET leased_by = ");
        lease
            .text(holder)
            .push(", leased_until = ")
            .int(until.timestamp());
        push_session_key(&mut lease, session);
        lease
            .push(" AND (leased_until IS NULL OR leased_until < ")
            .int(now.timestamp())
            .push(" OR leased_by = ")
            .text(holder)
            .push(")");
        let leased = S::Db::execute(&mut tx, lease).await? == 1;
        // A session without a record (stored before records were kept) is free to take.
        let recorded = leased || {
            let mut record =
                QueryBuilder::<S::Db>::new("SELECT 1 AS found FROM sessions_consolidations");
            push_session_key(&mut record, session);
            !S::Db::rows(&mut tx, record).await?.is_empty()
        };
        tx.commit().await?;
        Ok(leased || !recorded)
    }

    async fn release_session(&self, session: &SessionKey, holder: &str) -> Result<()> {
        let mut tx = self.write(WriteScope::Owner(&session.user_id)).await?;
        let mut release = QueryBuilder::<S::Db>::new(
            "UPDATE sessions_consolidations SET leased_by = NULL, leased_until = NULL",
        );
        push_session_key(&mut release, session);
        release.push(" AND leased_by = ").text(holder);
        S::Db::execute(&mut tx, release).await?;
        tx.commit().await
    }
}
