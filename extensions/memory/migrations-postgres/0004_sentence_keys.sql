-- mnemo memory store on PostgreSQL, step 4: sentence keys (see src/sentence_keys.rs). A turn
-- the user spoke is also kept as one vector per sentence, beside its own in memory_vectors.
-- The store drops them with the turn's vector; removing the memory removes them in any case.
CREATE TABLE memory_sentence_vectors (
    memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    ordinal   INTEGER NOT NULL,      -- the sentence's place in the turn, from 0
    user_id   TEXT,
    kind      TEXT NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (memory_id, ordinal)
);
CREATE INDEX memory_sentence_vectors_user ON memory_sentence_vectors (user_id);

-- The user's turns indexed before this step get their sentence keys from the indexer; their
-- own vectors come back from the embedding cache.
INSERT INTO embedding_queue (memory_id, enqueued_at)
SELECT id, created_at FROM memories
WHERE valid_until IS NULL AND kind = 'episode' AND source_role = 'user'
ON CONFLICT (memory_id) DO NOTHING;
