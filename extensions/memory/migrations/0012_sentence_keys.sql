-- mnemo memory store, schema 12: sentence keys (see src/sentence_keys.rs). A turn the user
-- spoke is also kept as one vector per sentence, beside its own vector in vec_memories. Rows
-- live as long as their memory is active: the triggers drop them when it is retired or removed.
CREATE TABLE memory_sentence_vectors (
    memory_id TEXT NOT NULL,
    ordinal   INTEGER NOT NULL,      -- the sentence's place in the turn, from 0
    user_id   TEXT,
    kind      TEXT NOT NULL,
    embedding BLOB NOT NULL,         -- little-endian f32, unit length
    PRIMARY KEY (memory_id, ordinal)
) WITHOUT ROWID;

CREATE TRIGGER memory_sentence_vectors_on_delete AFTER DELETE ON memories
BEGIN
    DELETE FROM memory_sentence_vectors WHERE memory_id = OLD.id;
END;

CREATE TRIGGER memory_sentence_vectors_on_retire AFTER UPDATE OF valid_until ON memories
WHEN NEW.valid_until IS NOT NULL
BEGIN
    DELETE FROM memory_sentence_vectors WHERE memory_id = NEW.id;
END;

-- The user's turns indexed before this schema get their sentence keys from the indexer; their
-- own vectors come back from the embedding cache.
INSERT OR IGNORE INTO embedding_queue (memory_id, enqueued_at)
SELECT id, created_at FROM memories
WHERE valid_until IS NULL AND kind = 'episode' AND source_role = 'user';
