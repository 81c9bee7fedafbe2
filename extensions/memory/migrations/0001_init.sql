-- mnemo memory store, schema 1: the reference design's tables, plus owner/chat columns so that
-- every read can be scoped to the caller, an embedding queue for the background indexer, and an
-- embedding cache keyed by content hash. The vector table (vec_memories) is created at start-up
-- for the embedding provider's dimension, not here.

CREATE TABLE memories (
    id            TEXT PRIMARY KEY,             -- ep_*, fact_*, ref_*
    kind          TEXT NOT NULL CHECK (kind IN ('episode', 'fact', 'reflection')),
    content       TEXT NOT NULL,
    session_id    TEXT,                         -- source session (episodes, extracted facts)
    user_id       TEXT,                         -- owner: the user who told us; NULL = nobody's
    chat_id       TEXT,                         -- chat the memory came from; NULL = personal
    embedding     BLOB,                         -- reserved; vectors live in vec_memories

    event_time    INTEGER NOT NULL,             -- when it happened (Unix seconds)
    created_at    INTEGER NOT NULL,             -- when recorded (Unix seconds)
    valid_until   INTEGER,                      -- NULL = active; set = soft-deleted at that time

    confidence    REAL NOT NULL DEFAULT 1.0,
    access_count  INTEGER NOT NULL DEFAULT 0,
    last_accessed INTEGER,
    decay_rate    REAL NOT NULL DEFAULT 0.1,    -- 0.0 = protected
    decayed_at    INTEGER,                      -- last time decay was applied

    source_ids    TEXT NOT NULL DEFAULT '[]',   -- JSON: provenance memory ids
    source_role   VARCHAR(255),                 -- 'user' or the agent's name (episodes)
    entity_ids    TEXT NOT NULL DEFAULT '[]',   -- JSON: denormalised entity ids
    tags          TEXT NOT NULL DEFAULT '[]',   -- JSON: ["work", ...]
    attributes    TEXT NOT NULL DEFAULT '{}'    -- JSON: extensible (enriched_at, supersedes, ...)
);
CREATE INDEX idx_memories_user_kind ON memories(user_id, kind, valid_until);
CREATE INDEX idx_memories_session ON memories(session_id, event_time);
CREATE INDEX idx_memories_kind_time ON memories(kind, event_time);

CREATE TABLE entities (
    id             TEXT PRIMARY KEY,            -- ent_*
    owner_id       TEXT NOT NULL DEFAULT '',    -- the user whose memories mention it
    canonical_name TEXT NOT NULL,
    type           TEXT NOT NULL,               -- person | project | organization | location | email | url | date | other
    aliases        TEXT NOT NULL DEFAULT '[]',  -- JSON: other names and raw mentions
    summary        TEXT,
    embedding      BLOB,
    mention_count  INTEGER NOT NULL DEFAULT 1,
    protected      INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX idx_entities_name ON entities(owner_id, canonical_name COLLATE NOCASE, type);

CREATE TABLE memory_entities (
    memory_id TEXT NOT NULL REFERENCES memories(id),
    entity_id TEXT NOT NULL REFERENCES entities(id),
    PRIMARY KEY (memory_id, entity_id)
);
CREATE INDEX idx_me_entity ON memory_entities(entity_id);
CREATE INDEX idx_me_memory ON memory_entities(memory_id);

CREATE VIRTUAL TABLE memories_fts USING fts5(
    content,
    content = 'memories',
    content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, content) VALUES (new.rowid, new.content);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    INSERT INTO memories_fts(rowid, content) VALUES (new.rowid, new.content);
END;

CREATE TABLE sessions_consolidations (
    session_id      TEXT PRIMARY KEY,
    user_id         TEXT,
    chat_id         TEXT,
    first_seen_at   INTEGER NOT NULL,
    consolidated_at INTEGER,                    -- NULL = pending
    attempts        INTEGER NOT NULL DEFAULT 0, -- failed consolidation attempts
    last_error      TEXT
);

CREATE TABLE memory_metadata (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Memories waiting for a vector; written in the same transaction as the memory.
CREATE TABLE embedding_queue (
    memory_id   TEXT PRIMARY KEY REFERENCES memories(id),
    enqueued_at INTEGER NOT NULL
);

-- Vectors by content hash and model, so the same text is never embedded twice.
CREATE TABLE embedding_cache (
    content_hash TEXT NOT NULL,
    model_id     TEXT NOT NULL,
    vector       BLOB NOT NULL,                 -- little-endian f32
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (content_hash, model_id)
);
