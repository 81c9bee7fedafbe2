//! The job history's SQL, the same in both backends: written once over sqlx's `QueryBuilder`,
//! which numbers the placeholders for each. The backends run these in their own transactions.

use mnemo_kernel::host::JobRun;
use sqlx::{Database, Encode, QueryBuilder, Type};

use crate::store::backend::JOB_HISTORY_KEPT;
use crate::store::rows::JOB_RUN_COLUMNS;

/// Inserts `run` into `job_history`.
pub(crate) fn insert_run<'args, DB>(run: &JobRun) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let (ok, report) = match &run.outcome {
        Ok(report) => (1_i64, report.clone()),
        Err(error) => (0, error.clone()),
    };
    let mut builder = QueryBuilder::new(format!("INSERT INTO job_history ({JOB_RUN_COLUMNS}) "));
    builder.push_values([run], |mut row, run| {
        row.push_bind(run.job.clone())
            .push_bind(run.at.timestamp_millis())
            .push_bind(run.finished_at.timestamp_millis())
            .push_bind(ok)
            .push_bind(report.clone())
            .push_bind(i64::try_from(run.failed_items).unwrap_or(i64::MAX));
    });
    builder
}

/// Drops the runs beyond the newest [`JOB_HISTORY_KEPT`].
pub(crate) fn prune_runs<'args, DB>() -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new(
        "DELETE FROM job_history WHERE id <= (SELECT MAX(id) FROM job_history) - ",
    );
    builder.push_bind(JOB_HISTORY_KEPT);
    builder
}

/// The newest `limit` runs, newest first.
pub(crate) fn recent_runs<'args, DB>(limit: usize) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new(format!(
        "SELECT {JOB_RUN_COLUMNS} FROM job_history ORDER BY id DESC LIMIT "
    ));
    builder.push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
    builder
}
