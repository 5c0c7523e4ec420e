-- Baseline schema: migrations 0001..0026 applied to an empty PostgreSQL database,
-- dumped by scripts/baseline-schema.sh. Generated: do not edit by hand.


CREATE TABLE api_tokens (
    id text NOT NULL,
    name text NOT NULL,
    token_hash text NOT NULL,
    origin text NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint,
    last_used_at bigint,
    revoked_at bigint
);

CREATE TABLE background_tasks (
    id text NOT NULL,
    owner text NOT NULL,
    lease_until bigint,
    session_id text NOT NULL,
    thread_id text,
    tool text NOT NULL,
    params text NOT NULL,
    status text NOT NULL,
    result text,
    error text,
    started_at bigint NOT NULL,
    finished_at bigint,
    delivered_at bigint
);

CREATE TABLE channel_cursors (
    channel text NOT NULL,
    next_update bigint DEFAULT 0 NOT NULL,
    lease_owner text,
    lease_until bigint
);

CREATE TABLE channel_deliveries (
    id text NOT NULL,
    channel text NOT NULL,
    body text NOT NULL,
    received_at bigint NOT NULL
);

CREATE TABLE channel_messages (
    channel text NOT NULL,
    message_id text NOT NULL,
    seen_at bigint NOT NULL
);

CREATE TABLE channel_strangers (
    channel text NOT NULL,
    user_id text NOT NULL,
    told_at bigint NOT NULL
);

CREATE TABLE channel_users (
    channel text NOT NULL,
    user_id text NOT NULL,
    origin text NOT NULL,
    added_at bigint NOT NULL
);

CREATE TABLE cost_agents (
    day text NOT NULL,
    agent text NOT NULL,
    spent_micros bigint DEFAULT 0 NOT NULL,
    max_call_micros bigint DEFAULT 0 NOT NULL,
    calls bigint DEFAULT 0 NOT NULL,
    updated_at bigint NOT NULL
);

CREATE TABLE cost_days (
    day text NOT NULL,
    spent_micros bigint DEFAULT 0 NOT NULL,
    max_call_micros bigint DEFAULT 0 NOT NULL,
    warned bigint DEFAULT 0 NOT NULL,
    updated_at bigint NOT NULL
);

CREATE TABLE cost_models (
    day text NOT NULL,
    model text NOT NULL,
    spent_micros bigint DEFAULT 0 NOT NULL,
    calls bigint DEFAULT 0 NOT NULL,
    updated_at bigint NOT NULL
);

CREATE TABLE daemons (
    id text NOT NULL,
    pid bigint NOT NULL,
    host text NOT NULL,
    home text NOT NULL,
    started_at bigint NOT NULL
);

CREATE TABLE engine_counters (
    key text NOT NULL,
    value bigint NOT NULL
);

CREATE TABLE idempotency_keys (
    scope text NOT NULL,
    key text NOT NULL,
    response text,
    created_at bigint NOT NULL,
    owner text,
    lease_until bigint
);

CREATE TABLE jobs (
    id text NOT NULL,
    title text NOT NULL,
    description text NOT NULL,
    owner text NOT NULL,
    origin text,
    parent_id text,
    state text NOT NULL,
    created_at bigint NOT NULL,
    started_at bigint,
    completed_at bigint,
    last_activity_at bigint,
    result text,
    error text,
    iterations bigint DEFAULT 0 NOT NULL,
    input_tokens bigint DEFAULT 0 NOT NULL,
    output_tokens bigint DEFAULT 0 NOT NULL,
    cost_micros bigint DEFAULT 0 NOT NULL,
    max_iterations bigint NOT NULL,
    timeout_ms bigint NOT NULL,
    use_planning bigint DEFAULT 0 NOT NULL,
    cancel_requested bigint DEFAULT 0 NOT NULL,
    lease_owner text,
    lease_until bigint,
    repair_attempts bigint DEFAULT 0 NOT NULL,
    restart_requested bigint DEFAULT 0 NOT NULL,
    needs_attention bigint DEFAULT 0 NOT NULL
);

CREATE TABLE llm_calls (
    id text NOT NULL,
    started_at bigint NOT NULL,
    reserved_micros bigint DEFAULT 0 NOT NULL,
    cost_micros bigint,
    finished_at bigint,
    agent text DEFAULT 'main'::text NOT NULL
);

CREATE TABLE memory_docs (
    id text NOT NULL,
    user_id text NOT NULL,
    doc_key text,
    content text NOT NULL,
    search_text text NOT NULL,
    category text NOT NULL,
    source text NOT NULL,
    content_hash text NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    accessed_at bigint,
    embedding bytea,
    embedding_model text,
    search_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, search_text)) STORED,
    agent text DEFAULT 'main'::text NOT NULL,
    shared bigint DEFAULT 0 NOT NULL
);

CREATE TABLE memory_embedding_cache (
    content_hash text NOT NULL,
    model text NOT NULL,
    vector bytea NOT NULL,
    created_at bigint NOT NULL
);

CREATE TABLE memory_generation (
    id bigint NOT NULL,
    n bigint NOT NULL
);

CREATE TABLE notification_attempts (
    notification_id text NOT NULL,
    attempt bigint NOT NULL,
    at bigint NOT NULL,
    delivered bigint NOT NULL,
    detail text NOT NULL
);

CREATE TABLE notifications (
    id text NOT NULL,
    user_id text NOT NULL,
    channel text NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    priority text NOT NULL,
    tags text DEFAULT '[]'::text NOT NULL,
    data text,
    source text NOT NULL,
    created_at bigint NOT NULL,
    status text NOT NULL,
    attempts bigint DEFAULT 0 NOT NULL,
    next_attempt_at bigint,
    lease_owner text,
    lease_until bigint,
    delivered_at bigint,
    last_error text,
    in_inbox bigint DEFAULT 0 NOT NULL,
    read_at bigint
);

CREATE TABLE pairing_codes (
    code_hash text NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint NOT NULL,
    used_at bigint
);

CREATE TABLE routine_run_tries (
    run_id text NOT NULL,
    number bigint NOT NULL,
    started_at bigint NOT NULL,
    ended_at bigint NOT NULL,
    status text NOT NULL,
    summary text
);

CREATE TABLE routine_runs (
    id text NOT NULL,
    routine_id text NOT NULL,
    trigger_type text NOT NULL,
    trigger_detail text,
    scheduled_for bigint,
    started_at bigint NOT NULL,
    completed_at bigint,
    status text NOT NULL,
    result_summary text,
    tokens_used bigint,
    job_id text,
    owner text,
    lease_until bigint,
    notification_id text,
    skip_reason text,
    dedup_key text,
    attempt bigint DEFAULT 1 NOT NULL,
    claim_id text,
    queued_at bigint,
    fire text
);

CREATE TABLE routines (
    id text NOT NULL,
    user_id text NOT NULL,
    name text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    enabled bigint DEFAULT 1 NOT NULL,
    trigger_type text NOT NULL,
    trigger_config text NOT NULL,
    action_type text NOT NULL,
    action_config text NOT NULL,
    guardrails text NOT NULL,
    notify text NOT NULL,
    timezone text,
    last_run_at bigint,
    next_fire_at bigint,
    run_count bigint DEFAULT 0 NOT NULL,
    consecutive_failures bigint DEFAULT 0 NOT NULL,
    state text DEFAULT '{}'::text NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    paused_at bigint,
    paused_by text,
    pause_note text,
    resumed_at bigint,
    jitter_us bigint DEFAULT 0 NOT NULL,
    due_at bigint,
    agent text
);

CREATE TABLE run_claims (
    id text NOT NULL,
    slot bigint NOT NULL,
    given_back bigint DEFAULT 0 NOT NULL
);

CREATE TABLE sessions (
    id text NOT NULL,
    user_id text NOT NULL,
    channel text NOT NULL,
    active_thread_id text,
    metadata text DEFAULT '{}'::text NOT NULL,
    created_at bigint NOT NULL,
    last_active_at bigint NOT NULL
);

CREATE TABLE settings (
    key text NOT NULL,
    value text NOT NULL,
    updated_at bigint NOT NULL
);

CREATE TABLE thread_checkpoints (
    thread_id text NOT NULL,
    stack text NOT NULL,
    "position" bigint NOT NULL,
    id text NOT NULL,
    data text NOT NULL
);

CREATE TABLE thread_messages (
    thread_id text NOT NULL,
    "position" bigint NOT NULL,
    seq bigint NOT NULL,
    role text NOT NULL,
    content text NOT NULL,
    data text NOT NULL
);

CREATE TABLE thread_turns (
    thread_id text NOT NULL,
    "position" bigint NOT NULL,
    number bigint NOT NULL,
    state text NOT NULL,
    data text NOT NULL,
    started_at bigint NOT NULL
);

CREATE TABLE threads (
    id text NOT NULL,
    session_id text NOT NULL,
    external_id text,
    title text,
    state text NOT NULL,
    turns text DEFAULT '[]'::text NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    view text DEFAULT '[]'::text NOT NULL
);

CREATE TABLE tool_health (
    name text NOT NULL,
    consecutive_failures bigint DEFAULT 0 NOT NULL,
    last_error text,
    last_failure_at bigint,
    disabled bigint DEFAULT 0 NOT NULL,
    disabled_at bigint,
    updated_at bigint NOT NULL
);

ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash);

ALTER TABLE ONLY background_tasks
    ADD CONSTRAINT background_tasks_pkey PRIMARY KEY (id);

ALTER TABLE ONLY channel_cursors
    ADD CONSTRAINT channel_cursors_pkey PRIMARY KEY (channel);

ALTER TABLE ONLY channel_deliveries
    ADD CONSTRAINT channel_deliveries_pkey PRIMARY KEY (id);

ALTER TABLE ONLY channel_messages
    ADD CONSTRAINT channel_messages_pkey PRIMARY KEY (channel, message_id);

ALTER TABLE ONLY channel_strangers
    ADD CONSTRAINT channel_strangers_pkey PRIMARY KEY (channel, user_id);

ALTER TABLE ONLY channel_users
    ADD CONSTRAINT channel_users_pkey PRIMARY KEY (channel, user_id);

ALTER TABLE ONLY cost_agents
    ADD CONSTRAINT cost_agents_pkey PRIMARY KEY (day, agent);

ALTER TABLE ONLY cost_days
    ADD CONSTRAINT cost_days_pkey PRIMARY KEY (day);

ALTER TABLE ONLY cost_models
    ADD CONSTRAINT cost_models_pkey PRIMARY KEY (day, model);

ALTER TABLE ONLY daemons
    ADD CONSTRAINT daemons_pkey PRIMARY KEY (id);

ALTER TABLE ONLY engine_counters
    ADD CONSTRAINT engine_counters_pkey PRIMARY KEY (key);

ALTER TABLE ONLY idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (scope, key);

ALTER TABLE ONLY jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY llm_calls
    ADD CONSTRAINT llm_calls_pkey PRIMARY KEY (id);

ALTER TABLE ONLY memory_docs
    ADD CONSTRAINT memory_docs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY memory_embedding_cache
    ADD CONSTRAINT memory_embedding_cache_pkey PRIMARY KEY (content_hash, model);

ALTER TABLE ONLY memory_generation
    ADD CONSTRAINT memory_generation_pkey PRIMARY KEY (id);

ALTER TABLE ONLY notification_attempts
    ADD CONSTRAINT notification_attempts_pkey PRIMARY KEY (notification_id, attempt);

ALTER TABLE ONLY notifications
    ADD CONSTRAINT notifications_pkey PRIMARY KEY (id);

ALTER TABLE ONLY pairing_codes
    ADD CONSTRAINT pairing_codes_pkey PRIMARY KEY (code_hash);

ALTER TABLE ONLY routine_run_tries
    ADD CONSTRAINT routine_run_tries_pkey PRIMARY KEY (run_id, number);

ALTER TABLE ONLY routine_runs
    ADD CONSTRAINT routine_runs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY routine_runs
    ADD CONSTRAINT routine_runs_slot_attempt UNIQUE (routine_id, scheduled_for, attempt);

ALTER TABLE ONLY routines
    ADD CONSTRAINT routines_pkey PRIMARY KEY (id);

ALTER TABLE ONLY routines
    ADD CONSTRAINT routines_user_id_name_key UNIQUE (user_id, name);

ALTER TABLE ONLY run_claims
    ADD CONSTRAINT run_claims_pkey PRIMARY KEY (id);

ALTER TABLE ONLY sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY sessions
    ADD CONSTRAINT sessions_user_id_channel_key UNIQUE (user_id, channel);

ALTER TABLE ONLY settings
    ADD CONSTRAINT settings_pkey PRIMARY KEY (key);

ALTER TABLE ONLY thread_checkpoints
    ADD CONSTRAINT thread_checkpoints_pkey PRIMARY KEY (thread_id, stack, "position");

ALTER TABLE ONLY thread_messages
    ADD CONSTRAINT thread_messages_pkey PRIMARY KEY (thread_id, "position", seq);

ALTER TABLE ONLY thread_turns
    ADD CONSTRAINT thread_turns_pkey PRIMARY KEY (thread_id, "position");

ALTER TABLE ONLY threads
    ADD CONSTRAINT threads_pkey PRIMARY KEY (id);

ALTER TABLE ONLY threads
    ADD CONSTRAINT threads_session_id_external_id_key UNIQUE (session_id, external_id);

ALTER TABLE ONLY tool_health
    ADD CONSTRAINT tool_health_pkey PRIMARY KEY (name);

CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens USING btree (name) WHERE (revoked_at IS NULL);

CREATE INDEX background_tasks_session ON background_tasks USING btree (session_id, started_at);

CREATE INDEX background_tasks_undelivered ON background_tasks USING btree (session_id, delivered_at, status);

CREATE INDEX channel_deliveries_channel ON channel_deliveries USING btree (channel, received_at);

CREATE INDEX channel_messages_seen ON channel_messages USING btree (seen_at);

CREATE INDEX idempotency_keys_created ON idempotency_keys USING btree (created_at);

CREATE INDEX jobs_active ON jobs USING btree (lease_until) WHERE (state = ANY (ARRAY['pending'::text, 'in_progress'::text, 'stuck'::text]));

CREATE INDEX jobs_by_owner ON jobs USING btree (owner, created_at);

CREATE INDEX jobs_by_parent ON jobs USING btree (parent_id);

CREATE INDEX jobs_recent ON jobs USING btree (created_at);

CREATE INDEX llm_calls_open ON llm_calls USING btree (started_at) WHERE (finished_at IS NULL);

CREATE INDEX llm_calls_started ON llm_calls USING btree (started_at);

CREATE INDEX memory_docs_category ON memory_docs USING btree (user_id, category, updated_at);

CREATE INDEX memory_docs_fts ON memory_docs USING gin (search_tsv);

CREATE UNIQUE INDEX memory_docs_key ON memory_docs USING btree (user_id, agent, doc_key) WHERE (doc_key IS NOT NULL);

CREATE INDEX notifications_channel_unread ON notifications USING btree (channel, read_at);

CREATE INDEX notifications_due ON notifications USING btree (status, next_attempt_at);

CREATE INDEX notifications_inbox ON notifications USING btree (user_id, in_inbox, read_at);

CREATE INDEX notifications_recent ON notifications USING btree (created_at);

CREATE INDEX routine_runs_dedup ON routine_runs USING btree (routine_id, dedup_key, started_at);

CREATE INDEX routine_runs_queue ON routine_runs USING btree (COALESCE(scheduled_for, started_at), id) WHERE (status = 'waiting'::text);

CREATE INDEX routine_runs_recent ON routine_runs USING btree (routine_id, started_at);

CREATE INDEX routine_runs_running ON routine_runs USING btree (lease_until) WHERE (status = 'running'::text);

CREATE INDEX routine_runs_waiting ON routine_runs USING btree (routine_id, scheduled_for) WHERE (status = 'waiting'::text);

CREATE INDEX routines_due ON routines USING btree (due_at) WHERE ((enabled = 1) AND (paused_at IS NULL) AND (due_at IS NOT NULL));

CREATE INDEX threads_by_session ON threads USING btree (session_id, updated_at);

ALTER TABLE ONLY jobs
    ADD CONSTRAINT jobs_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES jobs(id) ON DELETE SET NULL;

ALTER TABLE ONLY notification_attempts
    ADD CONSTRAINT notification_attempts_notification_id_fkey FOREIGN KEY (notification_id) REFERENCES notifications(id) ON DELETE CASCADE;

ALTER TABLE ONLY routine_run_tries
    ADD CONSTRAINT routine_run_tries_run_id_fkey FOREIGN KEY (run_id) REFERENCES routine_runs(id) ON DELETE CASCADE;

ALTER TABLE ONLY routine_runs
    ADD CONSTRAINT routine_runs_routine_id_fkey FOREIGN KEY (routine_id) REFERENCES routines(id) ON DELETE CASCADE;

ALTER TABLE ONLY thread_checkpoints
    ADD CONSTRAINT thread_checkpoints_thread_id_fkey FOREIGN KEY (thread_id) REFERENCES threads(id) ON DELETE CASCADE;

ALTER TABLE ONLY thread_messages
    ADD CONSTRAINT thread_messages_thread_id_position_fkey FOREIGN KEY (thread_id, "position") REFERENCES thread_turns(thread_id, "position") ON DELETE CASCADE;

ALTER TABLE ONLY thread_turns
    ADD CONSTRAINT thread_turns_thread_id_fkey FOREIGN KEY (thread_id) REFERENCES threads(id) ON DELETE CASCADE;

ALTER TABLE ONLY threads
    ADD CONSTRAINT threads_session_id_fkey FOREIGN KEY (session_id) REFERENCES sessions(id) ON DELETE CASCADE;

INSERT INTO engine_counters VALUES ('routines.version', 0);
INSERT INTO engine_counters VALUES ('routines.admission', 0);
INSERT INTO engine_counters VALUES ('signal.runs', 0);
INSERT INTO engine_counters VALUES ('signal.notifications', 0);
INSERT INTO engine_counters VALUES ('signal.jobs', 0);
INSERT INTO engine_counters VALUES ('signal.memory', 0);
INSERT INTO engine_counters VALUES ('signal.settings', 0);
INSERT INTO engine_counters VALUES ('pairing.wrong_codes', 0);
INSERT INTO engine_counters VALUES ('signal.tokens', 0);
INSERT INTO memory_generation VALUES (1, 0);
