-- Secrets found leaving (issue 47): each time a watched value or a key
-- shape was found in a tool call, a channel message, a hook's input or a
-- request to the LLM. Only the secret's name is kept, never its value;
-- `context` is a short excerpt with the value already replaced.
CREATE TABLE secret_leaks (
    id         TEXT PRIMARY KEY,
    at         BIGINT NOT NULL,
    secret     TEXT NOT NULL,
    place      TEXT NOT NULL,
    target     TEXT NOT NULL,
    agent      TEXT,
    session_id TEXT,
    run_id     TEXT,
    context    TEXT NOT NULL
);
CREATE INDEX secret_leaks_at ON secret_leaks (at);
