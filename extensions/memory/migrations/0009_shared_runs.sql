-- mnemo memory store, schema 9: what processes sharing one store must not both do. Several
-- processes on one store each run a scheduler; the first to claim a run due at a given time runs
-- it, the others skip it, so a nightly job runs once however many processes share the store.
CREATE TABLE job_runs (
    job        TEXT NOT NULL,
    due_at     INTEGER NOT NULL,    -- when the run was due (Unix seconds)
    claimed_at INTEGER NOT NULL,    -- when it was claimed (Unix seconds, wall clock)
    PRIMARY KEY (job, due_at)
);

-- A session's consolidation is leased by the process running it (`leased_by`, until
-- `leased_until`, Unix seconds), so that two processes never consolidate one session at once.
ALTER TABLE sessions_consolidations ADD COLUMN leased_by TEXT;
ALTER TABLE sessions_consolidations ADD COLUMN leased_until INTEGER;
