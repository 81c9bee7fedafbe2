-- mnemo memory store on PostgreSQL, step 5: API keys, kept in the store so that every server on it
-- accepts the same keys and a revocation reaches them all. Only a key's SHA-256 is stored.
-- Times in Unix milliseconds. `store_settings` holds one-off facts about the store (when a
-- data directory's keys.json was imported).
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,       -- `k` and 12 hex digits
    hash        TEXT NOT NULL,          -- SHA-256 of the whole key, in hex
    user_id     TEXT,                   -- NULL for an admin key
    admin       BIGINT NOT NULL,       -- 1 for an admin key
    chats       TEXT NOT NULL,          -- JSON array of the chats it is bound to
    label       TEXT,
    created_ms  BIGINT NOT NULL,
    revoked_ms  BIGINT
);
CREATE INDEX api_keys_by_user ON api_keys (user_id);

CREATE TABLE store_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
