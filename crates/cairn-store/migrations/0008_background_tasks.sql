-- Background tasks (`background_run`): one row per launched tool call, with
-- the conversation that launched it (session and thread), its full result,
-- and when its completion notice reached that conversation. `owner` and
-- `lease_until` let a restarted process mark the tasks of a dead one failed
-- ("interrupted") instead of losing them.
CREATE TABLE background_tasks (
    id           TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    lease_until  BIGINT,
    session_id   TEXT NOT NULL,
    thread_id    TEXT,
    tool         TEXT NOT NULL,
    params       TEXT NOT NULL,
    status       TEXT NOT NULL,
    result       TEXT,
    error        TEXT,
    started_at   BIGINT NOT NULL,
    finished_at  BIGINT,
    delivered_at BIGINT
);

CREATE INDEX background_tasks_session ON background_tasks (session_id, started_at);
CREATE INDEX background_tasks_undelivered ON background_tasks (session_id, delivered_at, status);
