-- mnemo memory store on PostgreSQL, step 10: memory poisoning (issue #47). A memory whose text
-- carries instructions aimed at the agent, hidden characters or an imitation of a tool call is
-- stored but quarantined: `quarantine` holds why, as JSON ({"reason": ..., "evidence": ...}),
-- until the user or an admin releases it. It is never put into the agent's context; search
-- shows it, flagged.
ALTER TABLE memories ADD COLUMN quarantine TEXT;
