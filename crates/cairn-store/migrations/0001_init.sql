-- Portable types, so that one set of queries serves both backends: times are
-- microseconds since the Unix epoch (BIGINT), booleans are 0/1 (BIGINT), ids
-- and JSON are TEXT.
CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE routines (
    id                   TEXT PRIMARY KEY,
    user_id              TEXT NOT NULL,
    name                 TEXT NOT NULL,
    description          TEXT NOT NULL DEFAULT '',
    enabled              BIGINT NOT NULL DEFAULT 1,
    trigger_type         TEXT NOT NULL,
    trigger_config       TEXT NOT NULL,
    action_type          TEXT NOT NULL,
    action_config        TEXT NOT NULL,
    guardrails           TEXT NOT NULL,
    notify               TEXT NOT NULL,
    timezone             TEXT,
    last_run_at          BIGINT,
    next_fire_at         BIGINT,
    run_count            BIGINT NOT NULL DEFAULT 0,
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    state                TEXT NOT NULL DEFAULT '{}',
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    UNIQUE (user_id, name)
);

CREATE INDEX routines_due ON routines (next_fire_at) WHERE enabled = 1 AND next_fire_at IS NOT NULL;

CREATE TABLE routine_runs (
    id             TEXT PRIMARY KEY,
    routine_id     TEXT NOT NULL REFERENCES routines (id) ON DELETE CASCADE,
    trigger_type   TEXT NOT NULL,
    trigger_detail TEXT,
    scheduled_for  BIGINT,
    started_at     BIGINT NOT NULL,
    completed_at   BIGINT,
    status         TEXT NOT NULL,
    result_summary TEXT,
    tokens_used    BIGINT,
    job_id         TEXT,
    owner          TEXT,
    lease_until    BIGINT,
    -- One run per scheduled slot; NULL slots (manual, event, webhook) never collide.
    UNIQUE (routine_id, scheduled_for)
);

CREATE INDEX routine_runs_recent ON routine_runs (routine_id, started_at);
CREATE INDEX routine_runs_running ON routine_runs (lease_until) WHERE status = 'running';
