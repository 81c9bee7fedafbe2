-- mnemo memory store, schema 19: the full-text index keeps each owner's memories together.
-- FTS5 lists every word's matches in rowid order, and the rowid was the memory's own, so one
-- owner's matches were spread through every user's: matching a word within the owner's scope
-- token (schema 14) read the word's whole list, and a search cost the store's size. Each
-- memory now has an index row id of its own, `fts_rowid` = (owner's number << 32) + the
-- owner's running count, so an owner's memories are one range of row ids, which FTS5 seeks
-- to in every word's list and leaves at its end (src/store/sqlite/scope.rs).
--   fts_owners: a number per owner ('' for memories without one), and the last count given.
-- The scope tokens stay: a chat's memories are several owners', matched by token.
CREATE TABLE fts_owners (
    number INTEGER PRIMARY KEY,
    owner TEXT NOT NULL UNIQUE,
    last_row INTEGER NOT NULL DEFAULT 1
);
INSERT INTO fts_owners (owner, last_row)
SELECT COALESCE(user_id, ''), COUNT(*) FROM memories GROUP BY COALESCE(user_id, '')
ORDER BY MIN(rowid);

ALTER TABLE memories ADD COLUMN fts_rowid INTEGER;
UPDATE memories SET fts_rowid = numbered.fts_rowid
FROM (
    SELECT m.rowid AS memory_row,
        (o.number << 32) + ROW_NUMBER() OVER (PARTITION BY o.number ORDER BY m.rowid) AS fts_rowid
    FROM memories m JOIN fts_owners o ON o.owner = COALESCE(m.user_id, '')
) AS numbered
WHERE memories.rowid = numbered.memory_row;
CREATE UNIQUE INDEX idx_memories_fts_rowid ON memories (fts_rowid);

DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_delete;
DROP TRIGGER memories_fts_update;
DROP TABLE memories_fts;

CREATE VIRTUAL TABLE memories_fts USING fts5(
    content,
    fts_scope,
    content = 'memories',
    content_rowid = 'fts_rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');

-- A new memory takes the next row id of its owner's range, then goes into the index.
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO fts_owners (owner) VALUES (COALESCE(new.user_id, ''))
    ON CONFLICT (owner) DO UPDATE SET last_row = last_row + 1;
    UPDATE memories SET fts_rowid = (
        SELECT (number << 32) + last_row FROM fts_owners WHERE owner = COALESCE(new.user_id, ''))
    WHERE rowid = new.rowid;
    INSERT INTO memories_fts(rowid, content, fts_scope)
    SELECT fts_rowid, content, fts_scope FROM memories WHERE rowid = new.rowid;
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content, fts_scope)
    VALUES ('delete', old.fts_rowid, old.content, old.fts_scope);
END;
-- A memory that changes owner moves to the new owner's range.
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, user_id, chat_id, shared ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content, fts_scope)
    VALUES ('delete', old.fts_rowid, old.content, old.fts_scope);
    INSERT INTO fts_owners (owner) SELECT COALESCE(new.user_id, '')
    WHERE old.user_id IS NOT new.user_id
    ON CONFLICT (owner) DO UPDATE SET last_row = last_row + 1;
    UPDATE memories SET fts_rowid = (
        SELECT (number << 32) + last_row FROM fts_owners WHERE owner = COALESCE(new.user_id, ''))
    WHERE rowid = new.rowid AND old.user_id IS NOT new.user_id;
    INSERT INTO memories_fts(rowid, content, fts_scope)
    SELECT fts_rowid, content, fts_scope FROM memories WHERE rowid = new.rowid;
END;
