-- Shared cost guard, tool health and job repair (issue 13).
--
-- cost_days: one row per UTC day ('YYYY-MM-DD'); every finished LLM call adds
-- its cost with `spent_micros = spent_micros + $n`, so processes sharing the
-- database add up instead of overwriting each other. `max_call_micros` is
-- the day's dearest call: what an admitted call reserves until it ends.
CREATE TABLE cost_days (
    day             TEXT PRIMARY KEY,
    spent_micros    BIGINT NOT NULL DEFAULT 0,
    max_call_micros BIGINT NOT NULL DEFAULT 0,
    warned          BIGINT NOT NULL DEFAULT 0,
    updated_at      BIGINT NOT NULL
);

-- llm_calls: one row per admitted LLM call, for the hourly window (rows
-- started in the last hour) and the reservations of calls still in flight
-- (finished_at NULL). Rows older than the window are pruned on admission.
CREATE TABLE llm_calls (
    id               TEXT PRIMARY KEY,
    started_at       BIGINT NOT NULL,
    reserved_micros  BIGINT NOT NULL DEFAULT 0,
    cost_micros      BIGINT,
    finished_at      BIGINT
);

CREATE INDEX llm_calls_started ON llm_calls (started_at);

-- tool_health: consecutive failures of each tool (a success resets them);
-- `disabled` hides the tool from the agent until `cairn tool enable`.
CREATE TABLE tool_health (
    name                 TEXT PRIMARY KEY,
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    last_error           TEXT,
    last_failure_at      BIGINT,
    disabled             BIGINT NOT NULL DEFAULT 0,
    disabled_at          BIGINT,
    updated_at           BIGINT NOT NULL
);

-- Job repair: restarts made by self-repair, a restart asked of the process
-- holding the job, and the flag of a job given up to a person.
ALTER TABLE jobs ADD COLUMN repair_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN restart_requested BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN needs_attention BIGINT NOT NULL DEFAULT 0;
