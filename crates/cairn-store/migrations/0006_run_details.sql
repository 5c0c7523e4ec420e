-- What the routine engine records on a run besides its outcome: the
-- notification it sent, why it was skipped, and the payload hash that
-- `dedup_window` compares across processes.
ALTER TABLE routine_runs ADD COLUMN notification_id TEXT;
ALTER TABLE routine_runs ADD COLUMN skip_reason TEXT;
ALTER TABLE routine_runs ADD COLUMN dedup_key TEXT;

CREATE INDEX routine_runs_dedup ON routine_runs (routine_id, dedup_key, started_at);

-- Counters the routine engine shares across processes: `routines.version`
-- is bumped by every change to a routine's definition (create, update,
-- enable, delete), so an engine notices another process's changes with one
-- cheap read; `routines.admission` is the row that admissions under the
-- global concurrency cap lock, so two processes on PostgreSQL cannot both
-- take the last place.
CREATE TABLE engine_counters (
    key   TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO engine_counters (key, value) VALUES ('routines.version', 0);
INSERT INTO engine_counters (key, value) VALUES ('routines.admission', 0);
