-- Baseline schema: migrations 0001..0026 applied to an empty SQLite database,
-- dumped by scripts/baseline-schema.sh. Generated: do not edit by hand.

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
    updated_at           BIGINT NOT NULL, paused_at BIGINT, paused_by TEXT, pause_note TEXT, resumed_at BIGINT, jitter_us BIGINT NOT NULL DEFAULT 0, due_at BIGINT, agent TEXT,
    UNIQUE (user_id, name)
);
CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL,
    channel          TEXT NOT NULL,
    active_thread_id TEXT,
    metadata         TEXT NOT NULL DEFAULT '{}',
    created_at       BIGINT NOT NULL,
    last_active_at   BIGINT NOT NULL,
    UNIQUE (user_id, channel)
);
CREATE TABLE threads (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    external_id TEXT,
    title       TEXT,
    state       TEXT NOT NULL,
    turns       TEXT NOT NULL DEFAULT '[]',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL, view TEXT NOT NULL DEFAULT '[]',
    UNIQUE (session_id, external_id)
);
CREATE INDEX threads_by_session ON threads (session_id, updated_at);
CREATE TABLE thread_checkpoints (
    thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    stack     TEXT NOT NULL,
    position  BIGINT NOT NULL,
    id        TEXT NOT NULL,
    data      TEXT NOT NULL,
    PRIMARY KEY (thread_id, stack, position)
);
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
, repair_attempts BIGINT NOT NULL DEFAULT 0, restart_requested BIGINT NOT NULL DEFAULT 0, needs_attention BIGINT NOT NULL DEFAULT 0);
CREATE INDEX jobs_recent ON jobs (created_at);
CREATE INDEX jobs_by_owner ON jobs (owner, created_at);
CREATE INDEX jobs_by_parent ON jobs (parent_id);
CREATE INDEX jobs_active ON jobs (lease_until) WHERE state IN ('pending', 'in_progress', 'stuck');
CREATE TABLE thread_turns (
    thread_id  TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    position   BIGINT NOT NULL,
    number     BIGINT NOT NULL,
    state      TEXT NOT NULL,
    data       TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    PRIMARY KEY (thread_id, position)
);
CREATE TABLE thread_messages (
    thread_id TEXT NOT NULL,
    position  BIGINT NOT NULL,
    seq       BIGINT NOT NULL,
    role      TEXT NOT NULL,
    content   TEXT NOT NULL,
    data      TEXT NOT NULL,
    PRIMARY KEY (thread_id, position, seq),
    FOREIGN KEY (thread_id, position) REFERENCES thread_turns (thread_id, position) ON DELETE CASCADE
);
CREATE TABLE notifications (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL,
    channel         TEXT NOT NULL,
    title           TEXT NOT NULL,
    body            TEXT NOT NULL,
    priority        TEXT NOT NULL,
    tags            TEXT NOT NULL DEFAULT '[]',
    data            TEXT,
    source          TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    status          TEXT NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    lease_owner     TEXT,
    lease_until     BIGINT,
    delivered_at    BIGINT,
    last_error      TEXT,
    in_inbox        BIGINT NOT NULL DEFAULT 0,
    read_at         BIGINT
);
CREATE INDEX notifications_due ON notifications (status, next_attempt_at);
CREATE INDEX notifications_inbox ON notifications (user_id, in_inbox, read_at);
CREATE INDEX notifications_recent ON notifications (created_at);
CREATE TABLE notification_attempts (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    attempt         BIGINT NOT NULL,
    at              BIGINT NOT NULL,
    delivered       BIGINT NOT NULL,
    detail          TEXT NOT NULL,
    PRIMARY KEY (notification_id, attempt)
);
CREATE TABLE engine_counters (
    key   TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    origin       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;
CREATE TABLE pairing_codes (
    code_hash  TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE TABLE idempotency_keys (
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    response   TEXT,
    created_at BIGINT NOT NULL, owner TEXT, lease_until BIGINT,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
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
CREATE INDEX notifications_channel_unread ON notifications (channel, read_at);
CREATE TABLE memory_docs (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    user_id         TEXT NOT NULL,
    doc_key         TEXT,
    content         TEXT NOT NULL,
    search_text     TEXT NOT NULL,
    category        TEXT NOT NULL,
    source          TEXT NOT NULL,
    content_hash    TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    accessed_at     BIGINT,
    embedding       BLOB,
    embedding_model TEXT
, agent TEXT NOT NULL DEFAULT 'main', shared BIGINT NOT NULL DEFAULT 0);
CREATE INDEX memory_docs_category ON memory_docs (user_id, category, updated_at);
CREATE VIRTUAL TABLE memory_fts USING fts5(
    search_text,
    content = 'memory_docs',
    content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER memory_docs_fts_insert AFTER INSERT ON memory_docs BEGIN
    INSERT INTO memory_fts (rowid, search_text) VALUES (new.seq, new.search_text);
END;
CREATE TRIGGER memory_docs_fts_delete AFTER DELETE ON memory_docs BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, search_text) VALUES ('delete', old.seq, old.search_text);
END;
CREATE TRIGGER memory_docs_fts_update AFTER UPDATE OF search_text ON memory_docs BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, search_text) VALUES ('delete', old.seq, old.search_text);
    INSERT INTO memory_fts (rowid, search_text) VALUES (new.seq, new.search_text);
END;
CREATE TABLE memory_embedding_cache (
    content_hash TEXT NOT NULL,
    model        TEXT NOT NULL,
    vector       BLOB NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (content_hash, model)
);
CREATE TABLE memory_generation (
    id BIGINT PRIMARY KEY,
    n  BIGINT NOT NULL
);
CREATE TABLE cost_days (
    day             TEXT PRIMARY KEY,
    spent_micros    BIGINT NOT NULL DEFAULT 0,
    max_call_micros BIGINT NOT NULL DEFAULT 0,
    warned          BIGINT NOT NULL DEFAULT 0,
    updated_at      BIGINT NOT NULL
);
CREATE TABLE llm_calls (
    id               TEXT PRIMARY KEY,
    started_at       BIGINT NOT NULL,
    reserved_micros  BIGINT NOT NULL DEFAULT 0,
    cost_micros      BIGINT,
    finished_at      BIGINT
, agent TEXT NOT NULL DEFAULT 'main');
CREATE INDEX llm_calls_started ON llm_calls (started_at);
CREATE TABLE tool_health (
    name                 TEXT PRIMARY KEY,
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    last_error           TEXT,
    last_failure_at      BIGINT,
    disabled             BIGINT NOT NULL DEFAULT 0,
    disabled_at          BIGINT,
    updated_at           BIGINT NOT NULL
);
CREATE TABLE "routine_runs" (
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
    attempt         BIGINT NOT NULL DEFAULT 1, claim_id TEXT, queued_at BIGINT, fire TEXT,
    -- One run per scheduled slot and attempt; NULL slots (manual, event, webhook) never collide.
    UNIQUE (routine_id, scheduled_for, attempt)
);
CREATE INDEX routine_runs_recent ON routine_runs (routine_id, started_at);
CREATE INDEX routine_runs_running ON routine_runs (lease_until) WHERE status = 'running';
CREATE INDEX routine_runs_dedup ON routine_runs (routine_id, dedup_key, started_at);
CREATE TABLE daemons (
    id         TEXT PRIMARY KEY,
    pid        BIGINT NOT NULL,
    host       TEXT NOT NULL,
    home       TEXT NOT NULL,
    started_at BIGINT NOT NULL
);
CREATE INDEX routines_due ON routines (due_at)
    WHERE enabled = 1 AND paused_at IS NULL AND due_at IS NOT NULL;
CREATE INDEX routine_runs_waiting ON routine_runs (routine_id, scheduled_for)
    WHERE status = 'waiting';
CREATE TABLE routine_run_tries (
    run_id     TEXT NOT NULL REFERENCES routine_runs (id) ON DELETE CASCADE,
    number     BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at   BIGINT NOT NULL,
    status     TEXT NOT NULL,
    summary    TEXT,
    PRIMARY KEY (run_id, number)
);
CREATE TABLE channel_cursors (
    channel     TEXT PRIMARY KEY,
    next_update BIGINT NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until BIGINT
);
CREATE TABLE channel_users (
    channel  TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    origin   TEXT NOT NULL,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (channel, user_id)
);
CREATE TABLE channel_strangers (
    channel  TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    told_at  BIGINT NOT NULL,
    PRIMARY KEY (channel, user_id)
);
CREATE TABLE cost_models (
    day          TEXT NOT NULL,
    model        TEXT NOT NULL,
    spent_micros BIGINT NOT NULL DEFAULT 0,
    calls        BIGINT NOT NULL DEFAULT 0,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (day, model)
);
CREATE TABLE run_claims (
    id          TEXT PRIMARY KEY,
    slot        BIGINT NOT NULL,
    given_back  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX llm_calls_open ON llm_calls (started_at) WHERE finished_at IS NULL;
CREATE INDEX routine_runs_queue ON routine_runs ((COALESCE(scheduled_for, started_at)), id)
    WHERE status = 'waiting';
CREATE TABLE channel_messages (
    channel    TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seen_at    BIGINT NOT NULL,
    PRIMARY KEY (channel, message_id)
);
CREATE INDEX channel_messages_seen ON channel_messages (seen_at);
CREATE TABLE channel_deliveries (
    id          TEXT PRIMARY KEY,
    channel     TEXT NOT NULL,
    body        TEXT NOT NULL,
    received_at BIGINT NOT NULL
);
CREATE INDEX channel_deliveries_channel ON channel_deliveries (channel, received_at);
CREATE UNIQUE INDEX memory_docs_key ON memory_docs (user_id, agent, doc_key) WHERE doc_key IS NOT NULL;
CREATE TABLE cost_agents (
    day             TEXT NOT NULL,
    agent           TEXT NOT NULL,
    spent_micros    BIGINT NOT NULL DEFAULT 0,
    max_call_micros BIGINT NOT NULL DEFAULT 0,
    calls           BIGINT NOT NULL DEFAULT 0,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (day, agent)
);
INSERT INTO engine_counters VALUES('routines.version',0);
INSERT INTO engine_counters VALUES('routines.admission',0);
INSERT INTO engine_counters VALUES('signal.runs',0);
INSERT INTO engine_counters VALUES('signal.notifications',0);
INSERT INTO engine_counters VALUES('signal.jobs',0);
INSERT INTO engine_counters VALUES('signal.memory',0);
INSERT INTO engine_counters VALUES('signal.settings',0);
INSERT INTO engine_counters VALUES('pairing.wrong_codes',0);
INSERT INTO engine_counters VALUES('signal.tokens',0);
INSERT INTO memory_generation VALUES(1,0);
