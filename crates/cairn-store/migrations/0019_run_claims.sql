-- Claims made ahead of their slot (a crowded slot is claimed up to a second
-- before it). A claim's row lives until its engine begins its runs at the
-- slot; until then a pause, a disable or an edit of a routine gives the
-- routine's run of that claim back (deletes it, counted in `given_back`),
-- so nothing a person stopped before its slot starts after all. The row is
-- locked by both sides, so a run is either given back or begun, never both.
CREATE TABLE run_claims (
    id          TEXT PRIMARY KEY,
    slot        BIGINT NOT NULL,
    given_back  BIGINT NOT NULL DEFAULT 0
);
ALTER TABLE routine_runs ADD COLUMN claim_id TEXT;
