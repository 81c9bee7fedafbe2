-- mnemo memory store, schema 11: the outcome of every job run, kept in the store so that it
-- outlives the process and processes sharing the store see each other's runs (the inspector's
-- job history). Times in Unix milliseconds; the newest 10,000 runs are kept.
CREATE TABLE job_history (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    job          TEXT NOT NULL,
    started_ms   INTEGER NOT NULL,
    finished_ms  INTEGER NOT NULL,
    ok           INTEGER NOT NULL,      -- 1 when it ran to the end
    report       TEXT NOT NULL,         -- its one-line report, or why it failed
    failed_items INTEGER NOT NULL
);
