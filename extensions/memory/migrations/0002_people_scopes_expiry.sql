-- mnemo memory store, schema 2: people (person entities with relation and identity), chat scopes
-- (shared memories), supersession, memory types with expiry (seeds 000 and 001).

ALTER TABLE memories ADD COLUMN memory_type TEXT;            -- conversation | fact | context; NULL = by kind
ALTER TABLE memories ADD COLUMN expires_at INTEGER;          -- NULL = never; retrieval hides it from then on
ALTER TABLE memories ADD COLUMN shared INTEGER NOT NULL DEFAULT 0;  -- 1 = every member of chat_id sees it
ALTER TABLE memories ADD COLUMN superseded_at INTEGER;       -- set when a newer memory replaced it
ALTER TABLE memories ADD COLUMN superseded_by_id TEXT;
ALTER TABLE memories ADD COLUMN subject_ids TEXT NOT NULL DEFAULT '[]';  -- JSON: person entity ids it is about

ALTER TABLE entities ADD COLUMN relation TEXT;               -- for people: "wife", "boss", ...
ALTER TABLE entities ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE entities ADD COLUMN external_id TEXT;            -- stable identity from a provider
ALTER TABLE entities ADD COLUMN provider TEXT;

ALTER TABLE sessions_consolidations ADD COLUMN provider TEXT;

CREATE INDEX idx_memories_expiry ON memories(expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX idx_memories_chat ON memories(chat_id, shared);
CREATE INDEX idx_entities_relation ON entities(owner_id, relation);
