-- mnemo memory store on PostgreSQL, schema 1: the SQLite store's tables as of its schema 8, with
-- the same columns and values, so that `mnemo migrate-store` copies rows as they are. Times are
-- Unix seconds (BIGINT) and lists are JSON text, as in SQLite. What differs is PostgreSQL's own:
-- full text is a generated tsvector with a GIN index (instead of FTS5), vectors are pgvector
-- (instead of sqlite-vec), storing and link order are identity columns (instead of SQLite's rowid), and
-- the indexer's queue and the sessions carry leases, so that one instance of several takes
-- each item.

CREATE EXTENSION IF NOT EXISTS vector;

-- Full text stems English words as FTS5's porter tokenizer does, and, like FTS5, drops no word:
-- PostgreSQL's `english` configuration would drop "don", "can", "not", "after" and a hundred
-- more, so that "what does Don like" could never match Don. Snowball's English stemmer without
-- a stop-word file.
CREATE TEXT SEARCH DICTIONARY mnemo_english_stem (TEMPLATE = snowball, LANGUAGE = english);
CREATE TEXT SEARCH CONFIGURATION mnemo_english (COPY = english);
ALTER TEXT SEARCH CONFIGURATION mnemo_english
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
    WITH mnemo_english_stem;

CREATE TABLE memories (
    id               TEXT PRIMARY KEY,             -- ep_*, fact_*, ref_*
    kind             TEXT NOT NULL CHECK (kind IN ('episode', 'fact', 'reflection')),
    content          TEXT NOT NULL,
    session_id       TEXT,
    user_id          TEXT,                         -- owner; NULL = nobody's
    chat_id          TEXT,                         -- NULL = personal
    embedding        BYTEA,                        -- reserved, as in SQLite; vectors live in memory_vectors
    event_time       BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    valid_until      BIGINT,                       -- NULL = active
    confidence       DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    access_count     BIGINT NOT NULL DEFAULT 0,
    last_accessed    BIGINT,
    decay_rate       DOUBLE PRECISION NOT NULL DEFAULT 0.1,
    decayed_at       BIGINT,
    source_ids       TEXT NOT NULL DEFAULT '[]',
    source_role      TEXT,
    entity_ids       TEXT NOT NULL DEFAULT '[]',
    tags             TEXT NOT NULL DEFAULT '[]',
    attributes       TEXT NOT NULL DEFAULT '{}',
    memory_type      TEXT,
    expires_at       BIGINT,
    shared           BIGINT NOT NULL DEFAULT 0,
    superseded_at    BIGINT,
    superseded_by_id TEXT,
    subject_ids      TEXT NOT NULL DEFAULT '[]',
    consolidated_at  BIGINT,
    faded_at         BIGINT,
    -- The order rows were stored in (SQLite's rowid): turns of one second keep their order.
    seq              BIGINT GENERATED ALWAYS AS IDENTITY,
    -- Full text: English stemming without stop words (see mnemo_english above).
    search_text      tsvector GENERATED ALWAYS AS (to_tsvector('mnemo_english', content)) STORED
);
CREATE INDEX idx_memories_user_kind ON memories (user_id, kind, valid_until);
CREATE INDEX idx_memories_session ON memories (session_id, user_id, event_time);
CREATE INDEX idx_memories_kind_time ON memories (kind, event_time);
CREATE INDEX idx_memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX idx_memories_chat ON memories (chat_id, shared);
CREATE INDEX idx_memories_search_text ON memories USING gin (search_text);

CREATE TABLE entities (
    id             TEXT PRIMARY KEY,               -- ent_*
    owner_id       TEXT NOT NULL DEFAULT '',
    canonical_name TEXT NOT NULL,
    type           TEXT NOT NULL,
    aliases        TEXT NOT NULL DEFAULT '[]',
    summary        TEXT,
    embedding      BYTEA,
    mention_count  BIGINT NOT NULL DEFAULT 1,
    protected      BIGINT NOT NULL DEFAULT 0,
    relation       TEXT,
    metadata       TEXT NOT NULL DEFAULT '{}',
    external_id    TEXT,
    provider       TEXT
);
CREATE UNIQUE INDEX idx_entities_name ON entities (owner_id, lower(canonical_name), type);
CREATE INDEX idx_entities_relation ON entities (owner_id, relation);

CREATE TABLE memory_entities (
    memory_id TEXT NOT NULL REFERENCES memories (id),
    entity_id TEXT NOT NULL REFERENCES entities (id),
    -- The order links were made in (SQLite's rowid): the entity list walks the newest first.
    position  BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (memory_id, entity_id)
);
CREATE INDEX idx_me_entity ON memory_entities (entity_id, position);

CREATE TABLE sessions_consolidations (
    user_id         TEXT NOT NULL,
    chat_id         TEXT NOT NULL DEFAULT '',     -- '' = personal
    session_id      TEXT NOT NULL,
    first_seen_at   BIGINT NOT NULL,
    consolidated_at BIGINT,                       -- NULL = pending
    attempts        BIGINT NOT NULL DEFAULT 0,
    last_error      TEXT,
    provider        TEXT,
    closed_at       BIGINT,                       -- NULL = still open
    leased_by       TEXT,                         -- the instance consolidating it now
    leased_until    BIGINT,                       -- until when (Unix seconds)
    PRIMARY KEY (user_id, chat_id, session_id)
);
CREATE INDEX idx_sessions_open ON sessions_consolidations (user_id, chat_id) WHERE closed_at IS NULL;
CREATE INDEX idx_sessions_pending ON sessions_consolidations (first_seen_at) WHERE consolidated_at IS NULL;

CREATE TABLE memory_metadata (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Memories waiting for a vector; written in the same transaction as the memory. An instance
-- that takes a batch leases it (`claimed_until`, Unix seconds) so that no other instance embeds
-- the same memories; a lease whose instance died runs out and the batch is taken again.
CREATE TABLE embedding_queue (
    memory_id     TEXT PRIMARY KEY REFERENCES memories (id),
    enqueued_at   BIGINT NOT NULL,
    claimed_until BIGINT
);
CREATE INDEX idx_embedding_queue_order ON embedding_queue (enqueued_at);

CREATE TABLE embedding_cache (
    content_hash TEXT NOT NULL,
    model_id     TEXT NOT NULL,
    vector       BYTEA NOT NULL,                  -- little-endian f32, as in SQLite
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (content_hash, model_id)
);

-- Vectors of the active memories (sqlite-vec's vec_memories). The column has no fixed length:
-- the HNSW index for the embedding provider's length is made when the provider is first seen.
CREATE TABLE memory_vectors (
    memory_id TEXT PRIMARY KEY,
    embedding vector NOT NULL,
    user_id   TEXT,
    kind      TEXT
);

CREATE TABLE ingested_events (
    user_id   TEXT NOT NULL DEFAULT '',
    event_id  TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    PRIMARY KEY (user_id, event_id)
);
CREATE INDEX ingested_events_memory ON ingested_events (memory_id);

-- Scheduled runs claimed by the instance that runs them: the first instance to claim a run due
-- at a given time runs it, the others skip it.
CREATE TABLE job_runs (
    job        TEXT NOT NULL,
    due_at     BIGINT NOT NULL,
    claimed_at BIGINT NOT NULL,
    PRIMARY KEY (job, due_at)
);
