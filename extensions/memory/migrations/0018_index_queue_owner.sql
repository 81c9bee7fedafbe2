-- The indexer takes the queue in turn by owner, newest first within each (see
-- store/index_order.rs): each queued row carries its memory's owner ('' for none), set here by
-- a trigger so that every writer of the queue gets it, and an index walks owners and their
-- newest rows (the rowid orders rows queued in the same second).
ALTER TABLE embedding_queue ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
UPDATE embedding_queue SET user_id = COALESCE(
    (SELECT m.user_id FROM memories m WHERE m.id = embedding_queue.memory_id), '');
CREATE INDEX idx_embedding_queue_owner ON embedding_queue (user_id, enqueued_at);
CREATE TRIGGER embedding_queue_owner AFTER INSERT ON embedding_queue
WHEN NEW.user_id = ''
BEGIN
    UPDATE embedding_queue SET user_id = COALESCE(
        (SELECT m.user_id FROM memories m WHERE m.id = NEW.memory_id), '')
    WHERE memory_id = NEW.memory_id;
END;
