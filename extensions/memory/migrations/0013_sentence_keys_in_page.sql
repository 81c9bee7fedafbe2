-- mnemo memory store, schema 13: sentence keys kept in rowid pages. Schema 12 kept them in a
-- WITHOUT ROWID table, whose b-tree holds at most about 1 KB of a row in its page: every
-- 1.5 KB vector spilled into an overflow page of its own, so a key took about 5 KB on disk
-- (the 100k bench store: 742 MB). A rowid table holds the whole row in its page; the unique
-- index keeps the lookups by memory, and the triggers are the same.
DROP TRIGGER memory_sentence_vectors_on_delete;
DROP TRIGGER memory_sentence_vectors_on_retire;

ALTER TABLE memory_sentence_vectors RENAME TO memory_sentence_vectors_schema12;

CREATE TABLE memory_sentence_vectors (
    memory_id TEXT NOT NULL,
    ordinal   INTEGER NOT NULL,      -- the sentence's place in the turn, from 0
    user_id   TEXT,
    kind      TEXT NOT NULL,
    embedding BLOB NOT NULL,         -- little-endian f32, unit length
    UNIQUE (memory_id, ordinal)
);

INSERT INTO memory_sentence_vectors (memory_id, ordinal, user_id, kind, embedding)
SELECT memory_id, ordinal, user_id, kind, embedding FROM memory_sentence_vectors_schema12
ORDER BY memory_id, ordinal;

DROP TABLE memory_sentence_vectors_schema12;

CREATE TRIGGER memory_sentence_vectors_on_delete AFTER DELETE ON memories
BEGIN
    DELETE FROM memory_sentence_vectors WHERE memory_id = OLD.id;
END;

CREATE TRIGGER memory_sentence_vectors_on_retire AFTER UPDATE OF valid_until ON memories
WHEN NEW.valid_until IS NOT NULL
BEGIN
    DELETE FROM memory_sentence_vectors WHERE memory_id = NEW.id;
END;
