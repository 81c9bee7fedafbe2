-- mnemo memory store, schema 6: a session belongs to a user in a chat. Hosts often name every
-- session `default`, `main` or `1`, so a session id alone mixed two users' conversations (one
-- recap, one consolidation, one's words stored as the other's facts). Sessions are now keyed by
-- (user, chat, session id); `chat_id` is '' for a personal conversation, so that the key has no
-- NULL in it (chat ids are never empty).
--
-- A consolidation marks the episodes it read (`memories.consolidated_at`): a user turn that
-- arrives later makes the session pending again, and the next consolidation reads only the
-- episodes not marked yet. Before, the rest of a chat that ran across the 03:00 job was never
-- consolidated.
CREATE TABLE sessions_by_user (
    user_id         TEXT NOT NULL,
    chat_id         TEXT NOT NULL DEFAULT '',
    session_id      TEXT NOT NULL,
    first_seen_at   INTEGER NOT NULL,
    consolidated_at INTEGER,                    -- NULL = pending
    attempts        INTEGER NOT NULL DEFAULT 0, -- failed consolidation attempts
    last_error      TEXT,
    provider        TEXT,
    closed_at       INTEGER,                    -- NULL = still open
    PRIMARY KEY (user_id, chat_id, session_id)
);

-- The rows there were, under the user and chat that opened them.
INSERT INTO sessions_by_user (user_id, chat_id, session_id, first_seen_at, consolidated_at,
                              attempts, last_error, provider, closed_at)
SELECT COALESCE(user_id, ''), COALESCE(chat_id, ''), session_id, first_seen_at, consolidated_at,
       attempts, last_error, provider, closed_at
FROM sessions_consolidations;

-- Every other user (or chat) who spoke under a reused session id had no row of their own: give
-- them one, pending, so that their turns are consolidated as theirs.
INSERT OR IGNORE INTO sessions_by_user (user_id, chat_id, session_id, first_seen_at)
SELECT user_id, COALESCE(chat_id, ''), session_id, MIN(event_time)
FROM memories
WHERE kind = 'episode' AND session_id IS NOT NULL AND user_id IS NOT NULL
GROUP BY user_id, COALESCE(chat_id, ''), session_id;

-- The episodes of sessions consolidated so far were read by that consolidation.
ALTER TABLE memories ADD COLUMN consolidated_at INTEGER;
UPDATE memories SET consolidated_at = (
    SELECT s.consolidated_at FROM sessions_by_user s
    WHERE s.user_id = memories.user_id AND s.chat_id = COALESCE(memories.chat_id, '')
      AND s.session_id = memories.session_id)
WHERE kind = 'episode' AND session_id IS NOT NULL AND user_id IS NOT NULL
  AND EXISTS (SELECT 1 FROM sessions_by_user s
              WHERE s.user_id = memories.user_id AND s.chat_id = COALESCE(memories.chat_id, '')
                AND s.session_id = memories.session_id AND s.consolidated_at IS NOT NULL);

DROP TABLE sessions_consolidations;
ALTER TABLE sessions_by_user RENAME TO sessions_consolidations;
CREATE INDEX idx_sessions_open ON sessions_consolidations(user_id, chat_id) WHERE closed_at IS NULL;
CREATE INDEX idx_sessions_pending ON sessions_consolidations(first_seen_at) WHERE consolidated_at IS NULL;

-- A session's turns are found by the whole key; neighbouring turns in ranking too.
DROP INDEX idx_memories_session;
CREATE INDEX idx_memories_session ON memories(session_id, user_id, event_time);
