-- Identity anchoring (seed 000): a person's external id from a provider (a Telegram user id)
-- names one person among one owner's people, whatever name they are called by; the same id
-- under another owner is another person. Also the index the look-up by external id takes.
CREATE UNIQUE INDEX idx_entities_external ON entities(owner_id, provider, external_id)
WHERE external_id IS NOT NULL;
