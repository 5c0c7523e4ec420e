-- Runs have an attempt: 1, or 2 for the one re-run of a scheduled slot whose
-- first run a crash interrupted. The slot key becomes
-- (routine_id, scheduled_for, attempt), so the store still takes at most one
-- run per slot and attempt.
ALTER TABLE routine_runs ADD COLUMN attempt BIGINT NOT NULL DEFAULT 1;
ALTER TABLE routine_runs DROP CONSTRAINT routine_runs_routine_id_scheduled_for_key;
ALTER TABLE routine_runs ADD CONSTRAINT routine_runs_slot_attempt UNIQUE (routine_id, scheduled_for, attempt);
