-- A delete from the full-text index takes the row's terms and positions out of the segments
-- that hold them (FTS5's `secure-delete`), so that no forgotten text can be rebuilt from the
-- index, at a cost that follows the row instead of the whole index. (Before, every purge
-- merged the index into one segment, a cost that grows with the store; the merge now follows
-- a removal in the background, for the leaf keys, see `store/sqlite/index_merge.rs`.) This
-- merge, once, drops whatever an earlier edit of a memory's text left behind. A migration that
-- creates `memories_fts` again must turn the option on again.
INSERT INTO memories_fts(memories_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO memories_fts(memories_fts) VALUES ('optimize');
