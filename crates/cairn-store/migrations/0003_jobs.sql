-- Full agent jobs. An active job (pending, in_progress, stuck) is held by the
-- process in lease_owner until lease_until; a lapsed lease means that process
-- is gone and the job is reaped. cancel_requested lets another process (the
-- CLI) ask the holder to stop it.
CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    title            TEXT NOT NULL,
    description      TEXT NOT NULL,
    owner            TEXT NOT NULL,
    origin           TEXT,
    parent_id        TEXT REFERENCES jobs (id) ON DELETE SET NULL,
    state            TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    started_at       BIGINT,
    completed_at     BIGINT,
    last_activity_at BIGINT,
    result           TEXT,
    error            TEXT,
    iterations       BIGINT NOT NULL DEFAULT 0,
    input_tokens     BIGINT NOT NULL DEFAULT 0,
    output_tokens    BIGINT NOT NULL DEFAULT 0,
    cost_micros      BIGINT NOT NULL DEFAULT 0,
    max_iterations   BIGINT NOT NULL,
    timeout_ms       BIGINT NOT NULL,
    use_planning     BIGINT NOT NULL DEFAULT 0,
    cancel_requested BIGINT NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_until      BIGINT
);

CREATE INDEX jobs_recent ON jobs (created_at);
CREATE INDEX jobs_by_owner ON jobs (owner, created_at);
CREATE INDEX jobs_by_parent ON jobs (parent_id);
CREATE INDEX jobs_active ON jobs (lease_until) WHERE state IN ('pending', 'in_progress', 'stuck');
