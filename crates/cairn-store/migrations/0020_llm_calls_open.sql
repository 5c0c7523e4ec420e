-- The calls still open (reserving part of the budget) are few however many
-- the hour holds: the guard sums their reservations through this index
-- instead of reading every call of the hour.
CREATE INDEX llm_calls_open ON llm_calls (started_at) WHERE finished_at IS NULL;
