-- mnemo memory store, schema 16: MCP sessions over HTTP, kept in the store so that a session
-- opened on one server continues on any other (the client's `initialize` parameters, from
-- which a server restores it), and bound to the API key that opened it (another key is told
-- the session does not exist). Times in Unix milliseconds.
CREATE TABLE mcp_sessions (
    id          TEXT PRIMARY KEY,
    key_id      TEXT,                   -- the key that opened it; set with the first answer
    initialize  TEXT,                   -- the client's initialize parameters, as JSON
    created_ms  INTEGER NOT NULL
);
CREATE INDEX mcp_sessions_by_age ON mcp_sessions (created_ms);
