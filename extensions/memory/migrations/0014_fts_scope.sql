-- mnemo memory store, schema 14: the full-text index knows whose each memory is, so that a
-- search is matched within the asker's scope by the index itself instead of ranking every
-- user's matches and filtering afterwards. `fts_scope` (a virtual generated column, computed
-- on read, so nothing is rewritten) holds one token per scope a memory is in:
--   u<HEX(user_id)>x  its owner;
--   c<HEX(chat_id)>x  the chat it was said in;
--   s<HEX(chat_id)>x  the chat it is shared with (`shared = 1`).
-- The hex spelling keeps any id one token of letters and digits, and the final `x` keeps the
-- porter stemmer off it. The search layer writes the same tokens (src/store/sqlite/scope.rs)
-- and ranks with the scope column's weight at 0, so BM25 reads the text alone.
ALTER TABLE memories ADD COLUMN fts_scope TEXT GENERATED ALWAYS AS (
    trim(
        CASE WHEN user_id IS NOT NULL THEN 'u' || hex(user_id) || 'x' ELSE '' END
        || CASE WHEN chat_id IS NOT NULL THEN ' c' || hex(chat_id) || 'x' ELSE '' END
        || CASE WHEN chat_id IS NOT NULL AND shared = 1 THEN ' s' || hex(chat_id) || 'x' ELSE '' END
    )
) VIRTUAL;

DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_delete;
DROP TRIGGER memories_fts_update;
DROP TABLE memories_fts;

CREATE VIRTUAL TABLE memories_fts USING fts5(
    content,
    fts_scope,
    content = 'memories',
    content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, content, fts_scope) VALUES (new.rowid, new.content, new.fts_scope);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content, fts_scope)
    VALUES ('delete', old.rowid, old.content, old.fts_scope);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, user_id, chat_id, shared ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content, fts_scope)
    VALUES ('delete', old.rowid, old.content, old.fts_scope);
    INSERT INTO memories_fts(rowid, content, fts_scope) VALUES (new.rowid, new.content, new.fts_scope);
END;
