//! `/v1/stats`, `/v1/users`, `/v1/users/{user_id}`, `/v1/jobs`, `/v1/jobs/runs`, and the probes `/healthz` and `/readyz`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use mnemo_kernel::host::JobRun;
use mnemo_memory_api::ForgetReceipt;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::views::IdText;
use super::{ApiPath, ApiQuery};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::AppState;

/// Counts of what is stored.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StatsView {
    /// Whose: the caller's, or null for everyone's (an admin key without `X-Mnemo-User`).
    user_id: Option<String>,
    episodes: i64,
    /// Active facts, but for those decay faded.
    facts: i64,
    /// Facts decay faded out of the context (still searchable), counted apart from `facts`.
    faded_facts: i64,
    reflections: i64,
    entities: i64,
    /// Memories waiting for their vector.
    pending_index: i64,
    /// When the newest memory was said or learnt.
    latest: Option<DateTime<Utc>>,
}

/// Counts of the caller's memories (or everyone's, for an admin key without `X-Mnemo-User`).
#[utoipa::path(
    get, path = "/v1/stats", tag = "admin",
    responses(
        (status = 200, description = "Counts", body = StatsView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn stats(
    State(state): State<Arc<AppState>>,
    principal: Principal,
) -> Result<axum::Json<StatsView>, ApiError> {
    principal.require_whole_user()?;
    let user = if principal.admin {
        principal.user_if_any()
    } else {
        Some(principal.user()?)
    };
    let stats = state.memory.stats(user).await?;
    Ok(axum::Json(StatsView {
        user_id: user.map(str::to_owned),
        episodes: stats.episodes,
        facts: stats.facts,
        faded_facts: stats.faded_facts,
        reflections: stats.reflections,
        entities: stats.entities,
        pending_index: stats.pending_index,
        latest: stats.latest,
    }))
}

/// What an erasure removed.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Erased {
    user_id: String,
    /// Memories removed, with their entities, people, sessions and recorded events.
    memories_removed: u64,
    /// The erasure's receipt: the kinds and ids of what it removed, no content. The audit
    /// table keeps it, and no other receipt of the user.
    receipt: ForgetReceipt,
}

/// Erase everything stored about a user. A user key may erase its own user only.
#[utoipa::path(
    delete, path = "/v1/users/{user_id}", tag = "admin",
    params(("user_id" = IdText, Path, description = "The user to erase")),
    responses(
        (status = 200, description = "Erased", body = Erased),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn erase_user(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath(IdText(user_id)): ApiPath<IdText>,
) -> Result<axum::Json<Erased>, ApiError> {
    principal.require_whole_user()?;
    mnemo_kernel::check_id("user_id", &user_id)?;
    if !principal.admin && principal.user()? != user_id {
        return Err(ApiError::forbidden(format!(
            "this key may erase its own user only, not `{user_id}`"
        )));
    }
    let receipt = state.memory.erase_user(&user_id).await?;
    let memories_removed = receipt
        .removed
        .iter()
        .filter(|entry| entry.kind != "entity")
        .count() as u64;
    Ok(axum::Json(Erased {
        user_id,
        memories_removed,
        receipt,
    }))
}

/// The scheduled jobs.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct JobsView {
    jobs: Vec<JobView>,
}

/// A scheduled job.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct JobView {
    name: String,
    /// The extension it belongs to.
    extension: String,
    /// When it runs: a cron expression.
    cron: String,
    description: String,
    /// Runs since the server started.
    runs: u64,
    /// Failed runs since the server started.
    failures: u64,
}

/// Every scheduled job, with its counts since start (admin key).
#[utoipa::path(
    get, path = "/v1/jobs", tag = "admin",
    responses(
        (status = 200, description = "Jobs", body = JobsView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn jobs(
    State(state): State<Arc<AppState>>,
    principal: Principal,
) -> Result<axum::Json<JobsView>, ApiError> {
    principal.require_admin()?;
    let jobs = state
        .kernel
        .jobs()
        .into_iter()
        .map(|(extension, spec)| {
            let totals = state.kernel.job_totals(&spec.name);
            JobView {
                runs: totals.as_ref().map_or(0, |totals| totals.runs),
                failures: totals.as_ref().map_or(0, |totals| totals.failures),
                name: spec.name,
                extension,
                cron: spec.cron,
                description: spec.description,
            }
        })
        .collect();
    Ok(axum::Json(JobsView { jobs }))
}

/// One run of a job.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct JobRunView {
    name: String,
    /// When it started.
    at: DateTime<Utc>,
    /// When it ended.
    finished_at: DateTime<Utc>,
    /// Whether it ran to the end.
    ok: bool,
    /// Its report, or why it failed.
    report: String,
    /// Items it failed on.
    failed_items: u64,
}

impl From<JobRun> for JobRunView {
    fn from(run: JobRun) -> Self {
        let (ok, report) = match run.outcome {
            Ok(report) => (true, report),
            Err(error) => (false, error),
        };
        Self {
            name: run.job,
            at: run.at,
            finished_at: run.finished_at,
            ok,
            report,
            failed_items: run.failed_items,
        }
    }
}

/// Run a job now and wait for it (admin key). Two runs of one job never overlap.
#[utoipa::path(
    post, path = "/v1/jobs/{name}/run", tag = "admin",
    params(("name" = String, Path, description = "The job's name")),
    responses(
        (status = 200, description = "It ran", body = JobRunView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn run_job(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath(name): ApiPath<String>,
) -> Result<axum::Json<JobRunView>, ApiError> {
    principal.require_admin()?;
    let run = state
        .kernel
        .run_job(&name)
        .await
        .map_err(|error| match error {
            mnemo_kernel::KernelError::UnknownJob(name) => {
                ApiError::not_found(format!("no job `{name}`; GET /v1/jobs lists them"))
            }
            other => ApiError::internal(&other),
        })?;
    Ok(axum::Json(run.into()))
}

/// The job history.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct JobRunsView {
    /// Newest first.
    runs: Vec<JobRunView>,
}

/// How many runs to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct JobRunsQuery {
    /// 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

/// The most runs one request lists.
const MAX_RUNS: usize = 1_000;

/// The last runs of every job with their outcomes, newest first (admin key). The store keeps
/// them, so they outlast restarts and include the runs of every instance that shares it.
#[utoipa::path(
    get, path = "/v1/jobs/runs", tag = "admin",
    params(JobRunsQuery),
    responses(
        (status = 200, description = "Runs", body = JobRunsView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn job_runs(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiQuery(query): ApiQuery<JobRunsQuery>,
) -> Result<axum::Json<JobRunsView>, ApiError> {
    principal.require_admin()?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=MAX_RUNS).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "`limit` must be between 1 and {MAX_RUNS}, not {limit}"
        )));
    }
    let runs = state
        .kernel
        .job_history(limit)
        .await
        .into_iter()
        .map(JobRunView::from)
        .collect();
    Ok(axum::Json(JobRunsView { runs }))
}

/// The users whose memories the store holds.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct UsersView {
    /// By user id.
    users: Vec<UserView>,
}

/// A user with memories.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct UserView {
    user_id: String,
    /// Their memories of every kind, active or not.
    memories: i64,
}

/// The most users `/v1/users` lists.
const MAX_USERS: usize = 10_000;

/// The users with memories, by id (admin key; at most 10,000).
#[utoipa::path(
    get, path = "/v1/users", tag = "admin",
    responses(
        (status = 200, description = "Users", body = UsersView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn users(
    State(state): State<Arc<AppState>>,
    principal: Principal,
) -> Result<axum::Json<UsersView>, ApiError> {
    principal.require_admin()?;
    let users = state
        .memory
        .owners(MAX_USERS)
        .await?
        .into_iter()
        .map(|owner| UserView {
            user_id: owner.user_id,
            memories: owner.memories,
        })
        .collect();
    Ok(axum::Json(UsersView { users }))
}

/// A probe's answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Health {
    /// `ok`, `ready` or why not.
    status: String,
}

/// Liveness: the process serves requests.
#[utoipa::path(
    get, path = "/healthz", tag = "probes", security(()),
    responses((status = 200, description = "Alive", body = Health)),
)]
pub(crate) async fn healthz() -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok".to_owned(),
    })
}

/// How long `/readyz` waits for the store: a load balancer hears "not ready" within a second
/// of the database going away.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_millis(800);

/// Readiness: the memory store answers.
#[utoipa::path(
    get, path = "/readyz", tag = "probes", security(()),
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "Not ready", body = Health),
    ),
)]
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, axum::Json<Health>) {
    let not_ready = |status: String| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(Health { status }),
        )
    };
    // The database's probe knows at once when it is down; otherwise one query checks, and a
    // store that cannot answer it within the probe's interval is not ready either.
    if let Some(reason) = state.memory.store_unreachable() {
        return not_ready(format!(
            "the memory store's database does not answer: {reason}"
        ));
    }
    // While the query waits (for a connection, say), the probe may find the database gone.
    let query = state.memory.pending_index();
    tokio::pin!(query);
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        tokio::select! {
            answered = &mut query => return match answered {
                Ok(_) => (
                    StatusCode::OK,
                    axum::Json(Health {
                        status: "ready".to_owned(),
                    }),
                ),
                Err(error) => not_ready(format!("the memory store does not answer: {error}")),
            },
            () = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                if let Some(reason) = state.memory.store_unreachable() {
                    return not_ready(format!(
                        "the memory store's database does not answer: {reason}"
                    ));
                }
                if tokio::time::Instant::now() >= deadline {
                    return not_ready(format!(
                        "the memory store did not answer within {} s",
                        READY_WITHIN.as_secs_f64()
                    ));
                }
            }
        }
    }
}
