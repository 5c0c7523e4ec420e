-- The global run limit queues rather than refuses. A run admitted while
-- `routines.max_concurrent` runs are going is recorded `waiting` with
-- `queued_at` set (when it joined the queue; kept after it starts), and
-- starts, oldest slot first, when a place frees. An unscheduled fire's
-- payload (a webhook's body, an event's message) waits with it in `fire`,
-- so the run starts as it was fired.
ALTER TABLE routine_runs ADD COLUMN queued_at BIGINT;
ALTER TABLE routine_runs ADD COLUMN fire TEXT;

-- Waiting runs in the order they start: by slot (an unscheduled fire's
-- time stands for its slot).
CREATE INDEX routine_runs_queue ON routine_runs ((COALESCE(scheduled_for, started_at)), id)
    WHERE status = 'waiting';
