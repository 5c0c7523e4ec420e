-- The gateway's credentials and memory. Tokens and pairing codes are kept
-- only as SHA-256 hashes, so a copy of the database lets nobody in.
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
-- A name names one live token; revoked ones keep theirs for the record.
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;

-- One-time pairing codes: any daemon on the database accepts one, once.
CREATE TABLE pairing_codes (
    code_hash  TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);

-- Requests that carried an idempotency key: the first one claims the key
-- (response NULL while it runs) and its answer is kept for repeats.
CREATE TABLE idempotency_keys (
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    response   TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
