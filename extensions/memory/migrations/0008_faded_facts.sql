-- mnemo memory store, schema 8: decay fades a fact instead of deleting it. A fact nobody recalls
-- for weeks leaves the context the agent is given (`faded_at`), but search still finds it, ranked
-- lower by its low confidence, and recalling it brings it back. Before, decay soft-deleted it
-- for good (`valid_until`), so a preference stated once was lost after about a month.
ALTER TABLE memories ADD COLUMN faded_at INTEGER;
