-- mnemo memory store on PostgreSQL, step 12: trust by source (issue #47). Each memory records
-- whose words it is, and search weighs it by that: `user` (a turn the user said), `agent` (a
-- turn the agent said, or a claim of the chat's model that the user's words do not bear out),
-- `told` (through `remember` and the like), `inferred` (the consolidation's facts),
-- `reflected`, `imported` and `service` (the HTTP API). Rows stored before this step get the
-- origin their kind and provenance show: a fact drawn from turns (its provenance names an
-- episode) was inferred, any other fact was told.
ALTER TABLE memories ADD COLUMN origin TEXT NOT NULL DEFAULT 'user'
    CHECK (origin IN ('user', 'agent', 'told', 'inferred', 'reflected', 'imported', 'service'));
UPDATE memories SET origin = CASE
    WHEN kind = 'reflection' THEN 'reflected'
    WHEN kind = 'episode' AND source_role IS NOT NULL AND source_role <> 'user' THEN 'agent'
    WHEN kind = 'episode' THEN 'user'
    WHEN source_ids LIKE '%"ep\_%' ESCAPE '\' THEN 'inferred'
    ELSE 'told'
END;
