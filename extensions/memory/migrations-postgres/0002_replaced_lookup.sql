-- mnemo memory store on PostgreSQL, step 2: what a fact replaced, found without reading the
-- owner's every memory (the inspector shows a fact's chain of older versions).
CREATE INDEX idx_memories_superseded_by ON memories (superseded_by_id)
    WHERE superseded_by_id IS NOT NULL;
