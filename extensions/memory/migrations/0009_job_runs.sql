-- mnemo memory store, schema 9: scheduled runs claimed by the instance that runs them. Several
-- processes on one store each run a scheduler; the first to claim a run due at a given time runs
-- it, the others skip it, so a nightly job runs once however many processes share the store.
CREATE TABLE job_runs (
    job        TEXT NOT NULL,
    due_at     INTEGER NOT NULL,    -- when the run was due (Unix seconds)
    claimed_at INTEGER NOT NULL,    -- when it was claimed (Unix seconds, wall clock)
    PRIMARY KEY (job, due_at)
);
