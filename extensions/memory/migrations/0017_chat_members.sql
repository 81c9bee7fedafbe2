-- mnemo memory store, schema 17: who belongs to which chat. A user reads what others shared in
-- a chat only as a member: one whose turns a trusted writer (the host, an admin key) recorded
-- there, or whom an admin added. Chats of earlier schemas keep the users whose turns or
-- memories they hold. Times in Unix milliseconds.
CREATE TABLE chat_members (
    chat_id   TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    added_by  TEXT NOT NULL,            -- `turn` or `admin`
    added_ms  INTEGER NOT NULL,
    PRIMARY KEY (chat_id, user_id)
);
CREATE INDEX chat_members_by_user ON chat_members (user_id);

INSERT INTO chat_members (chat_id, user_id, added_by, added_ms)
SELECT DISTINCT chat_id, user_id, 'turn', 0 FROM memories
WHERE chat_id IS NOT NULL AND chat_id <> '' AND user_id IS NOT NULL AND user_id <> '';
