-- mnemo memory store on PostgreSQL, step 8: the indexer takes the queue in turn by owner,
-- newest first within each (see store/index_order.rs). Each queued row carries its memory's
-- owner ('' for none), set by a trigger so that every writer of the queue gets it, and an
-- index walks owners and their newest rows; `seq` orders rows queued in the same second.
ALTER TABLE embedding_queue ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE embedding_queue ADD COLUMN seq BIGINT GENERATED ALWAYS AS IDENTITY;
UPDATE embedding_queue q SET user_id = COALESCE(m.user_id, '') FROM memories m WHERE m.id = q.memory_id;
CREATE INDEX idx_embedding_queue_owner ON embedding_queue (user_id, enqueued_at, seq);
CREATE FUNCTION embedding_queue_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.user_id = '' THEN
        NEW.user_id := COALESCE((SELECT m.user_id FROM memories m WHERE m.id = NEW.memory_id), '');
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER embedding_queue_owner BEFORE INSERT ON embedding_queue
FOR EACH ROW EXECUTE FUNCTION embedding_queue_owner();
