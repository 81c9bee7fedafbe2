-- mnemo memory store on PostgreSQL, step 11: forgetting follows lineage (issue #47). Every
-- forget and erasure leaves a receipt, the kinds and ids of what it removed or changed and
-- counts of the index entries and caches that went with them, never content. Erasing a user
-- removes their earlier receipts and keeps the erasure's own.
CREATE TABLE forget_receipts (
    id TEXT PRIMARY KEY,
    user_id TEXT,
    created_at BIGINT NOT NULL,
    receipt TEXT NOT NULL
);
CREATE INDEX idx_forget_receipts_user ON forget_receipts (user_id, created_at);
