-- Conversations by the turn and the message: a turn is a row, each of its
-- messages (user, assistant, tool call results) is a row, so persisting a
-- turn costs the same in a long thread as in a short one. A thread's `view`
-- lists the turn positions it shows, as [first, last] ranges; undo
-- checkpoints keep such views instead of copies of the turns.
-- `threads.turns` is emptied by the conversion that runs with this migration.
ALTER TABLE threads ADD COLUMN view TEXT NOT NULL DEFAULT '[]';

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
