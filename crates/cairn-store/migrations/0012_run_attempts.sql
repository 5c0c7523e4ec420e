-- Runs have an attempt: 1, or 2 for the one re-run of a scheduled slot whose
-- first run a crash interrupted. The slot key becomes
-- (routine_id, scheduled_for, attempt), so the store still takes at most one
-- run per slot and attempt. SQLite cannot drop a table's inline UNIQUE
-- constraint, so the table is rebuilt (nothing references it).
CREATE TABLE routine_runs_new (
    id              TEXT PRIMARY KEY,
    routine_id      TEXT NOT NULL REFERENCES routines (id) ON DELETE CASCADE,
    trigger_type    TEXT NOT NULL,
    trigger_detail  TEXT,
    scheduled_for   BIGINT,
    started_at      BIGINT NOT NULL,
    completed_at    BIGINT,
    status          TEXT NOT NULL,
    result_summary  TEXT,
    tokens_used     BIGINT,
    job_id          TEXT,
    owner           TEXT,
    lease_until     BIGINT,
    notification_id TEXT,
    skip_reason     TEXT,
    dedup_key       TEXT,
    attempt         BIGINT NOT NULL DEFAULT 1,
    -- One run per scheduled slot and attempt; NULL slots (manual, event, webhook) never collide.
    UNIQUE (routine_id, scheduled_for, attempt)
);

INSERT INTO routine_runs_new (id, routine_id, trigger_type, trigger_detail, scheduled_for, started_at,
    completed_at, status, result_summary, tokens_used, job_id, owner, lease_until, notification_id,
    skip_reason, dedup_key, attempt)
SELECT id, routine_id, trigger_type, trigger_detail, scheduled_for, started_at, completed_at, status,
    result_summary, tokens_used, job_id, owner, lease_until, notification_id, skip_reason, dedup_key, 1
FROM routine_runs;

DROP TABLE routine_runs;
ALTER TABLE routine_runs_new RENAME TO routine_runs;

CREATE INDEX routine_runs_recent ON routine_runs (routine_id, started_at);
CREATE INDEX routine_runs_running ON routine_runs (lease_until) WHERE status = 'running';
CREATE INDEX routine_runs_dedup ON routine_runs (routine_id, dedup_key, started_at);
