-- mnemo memory store, schema 3: conversation events already stored, by their wire id, so that an
-- import killed half-way and run again stores each event exactly once.
CREATE TABLE ingested_events (
    event_id  TEXT PRIMARY KEY,
    memory_id TEXT NOT NULL
);
