-- mnemo memory store, schema 7: a conversation event's id is unique per user, not across the
-- store. With many users on one server (`mnemo serve`), two clients may both call an event `e1`;
-- with ids unique across the store the second user's event was taken for the first's, not stored,
-- and its answer told the second user that someone had sent `e1`.
--
-- Rows recorded before this schema keep `user_id` '' (their user is read from their memory when
-- it still exists): such a row still stands for the event of any user, as it did, so that a
-- forgotten event sent again stays forgotten.
CREATE TABLE ingested_events_by_user (
    user_id   TEXT NOT NULL DEFAULT '',
    event_id  TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    PRIMARY KEY (user_id, event_id)
);
INSERT INTO ingested_events_by_user (user_id, event_id, memory_id)
    SELECT COALESCE(m.user_id, ''), e.event_id, e.memory_id
    FROM ingested_events e LEFT JOIN memories m ON m.id = e.memory_id;
DROP TABLE ingested_events;
ALTER TABLE ingested_events_by_user RENAME TO ingested_events;
CREATE INDEX ingested_events_memory ON ingested_events (memory_id);
