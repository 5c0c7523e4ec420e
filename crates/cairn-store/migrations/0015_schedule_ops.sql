-- Schedule operations: pause with a note, jitter, waiting slots, retries.
-- A paused routine keeps its schedule and fires nothing (paused_* set);
-- resumed_at tells the engine that slots older than it were missed while
-- paused. A routine's slot is next_fire_at (its identity); due_at is when
-- it fires, next_fire_at + jitter_us (a fixed offset per routine, computed
-- from its id), and is what the timer's index orders.
ALTER TABLE routines ADD COLUMN paused_at BIGINT;
ALTER TABLE routines ADD COLUMN paused_by TEXT;
ALTER TABLE routines ADD COLUMN pause_note TEXT;
ALTER TABLE routines ADD COLUMN resumed_at BIGINT;
ALTER TABLE routines ADD COLUMN jitter_us BIGINT NOT NULL DEFAULT 0;
ALTER TABLE routines ADD COLUMN due_at BIGINT;
UPDATE routines SET due_at = next_fire_at;

DROP INDEX routines_due;
CREATE INDEX routines_due ON routines (due_at)
    WHERE enabled = 1 AND paused_at IS NULL AND due_at IS NOT NULL;

-- Slots waiting their turn behind another run of their routine.
CREATE INDEX routine_runs_waiting ON routine_runs (routine_id, scheduled_for)
    WHERE status = 'waiting';

-- Each try of a run whose routine has `retry` (the run stays one row, so
-- the slot key and the failure streak count runs, not tries).
CREATE TABLE routine_run_tries (
    run_id     TEXT NOT NULL REFERENCES routine_runs (id) ON DELETE CASCADE,
    number     BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at   BIGINT NOT NULL,
    status     TEXT NOT NULL,
    summary    TEXT,
    PRIMARY KEY (run_id, number)
);
