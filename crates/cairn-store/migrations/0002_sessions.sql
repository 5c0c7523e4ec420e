-- Conversations: a session per (user, channel), threads within it, and the
-- undo/redo checkpoints of each thread. Turns are kept as one JSON array per
-- thread (written by the agent crate, opaque here).
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
    updated_at  BIGINT NOT NULL,
    UNIQUE (session_id, external_id)
);

CREATE INDEX threads_by_session ON threads (session_id, updated_at);

-- One row per checkpoint; stack is 'undo' or 'redo', position orders each stack.
CREATE TABLE thread_checkpoints (
    thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    stack     TEXT NOT NULL,
    position  BIGINT NOT NULL,
    id        TEXT NOT NULL,
    data      TEXT NOT NULL,
    PRIMARY KEY (thread_id, stack, position)
);
