-- mnemo memory store on PostgreSQL, step 3: the outcome of every job run, shared by the
-- instances on this database and kept across restarts (the inspector's job history). Times in
-- Unix milliseconds; the newest 10,000 runs are kept.
CREATE TABLE job_history (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job          TEXT NOT NULL,
    started_ms   BIGINT NOT NULL,
    finished_ms  BIGINT NOT NULL,
    ok           BIGINT NOT NULL,       -- 1 when it ran to the end
    report       TEXT NOT NULL,         -- its one-line report, or why it failed
    failed_items BIGINT NOT NULL
);
