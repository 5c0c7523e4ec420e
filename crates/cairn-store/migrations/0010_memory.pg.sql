-- Memory documents (PostgreSQL). `search_text` is the document folded by
-- cairn_core::fold (lower case, accents removed), so the 'simple'
-- configuration needs no `unaccent` extension (which needs privileges to
-- install); a generated tsvector column carries the GIN index.
-- Embeddings are little-endian f32 vectors, normalised to unit length.
CREATE TABLE memory_docs (
    id              TEXT PRIMARY KEY,
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
    embedding       BYTEA,
    embedding_model TEXT,
    search_tsv      tsvector GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED
);

CREATE UNIQUE INDEX memory_docs_key ON memory_docs (user_id, doc_key) WHERE doc_key IS NOT NULL;
CREATE INDEX memory_docs_category ON memory_docs (user_id, category, updated_at);
CREATE INDEX memory_docs_fts ON memory_docs USING GIN (search_tsv);

-- Embeddings by content hash and model, so storing the same text again (or
-- re-indexing) costs no provider call.
CREATE TABLE memory_embedding_cache (
    content_hash TEXT NOT NULL,
    model        TEXT NOT NULL,
    vector       BYTEA NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (content_hash, model)
);

-- Bumped by every write that changes which vectors recall compares with, so
-- a process can keep them in memory and reload them only after a change.
CREATE TABLE memory_generation (
    id BIGINT PRIMARY KEY,
    n  BIGINT NOT NULL
);
INSERT INTO memory_generation (id, n) VALUES (1, 0);
