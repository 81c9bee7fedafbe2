-- "As of" queries, bi-temporal (issue #47): when a memory was true in the world, apart from
-- when it was recorded (`created_at`) and from when it was deleted (`valid_until`):
-- `valid_from` (where known, else when it was said) and `valid_to` (NULL while it holds). A
-- supersession closes the old fact's validity at the new one's start; a correction shows the
-- old fact was never true (`valid_to = valid_from`) and holds from the old fact's start.
-- Earlier rows: true from their event time; superseded ones until they were superseded,
-- corrected ones never.
ALTER TABLE memories ADD COLUMN valid_from INTEGER;
ALTER TABLE memories ADD COLUMN valid_to INTEGER;
UPDATE memories SET valid_from = event_time;
UPDATE memories SET valid_to = superseded_at WHERE superseded_at IS NOT NULL;
UPDATE memories SET valid_to = valid_from
    WHERE superseded_at IS NULL AND superseded_by_id IS NOT NULL AND valid_until IS NOT NULL;
