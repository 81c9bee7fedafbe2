-- A session closes when its user opens another. The hot path announces each closed session
-- once, when it closes, instead of every unconsolidated session of the user at every new
-- session (which grew with the store when consolidation was off or failing).
ALTER TABLE sessions_consolidations ADD COLUMN closed_at INTEGER;
UPDATE sessions_consolidations SET closed_at = consolidated_at WHERE consolidated_at IS NOT NULL;
CREATE INDEX idx_sessions_open ON sessions_consolidations(user_id) WHERE closed_at IS NULL;
