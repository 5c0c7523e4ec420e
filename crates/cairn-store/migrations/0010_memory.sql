-- Memory documents (SQLite). `search_text` is the document folded by
-- cairn_core::fold (lower case, accents removed), kept in an FTS5 index by
-- triggers; the tokenizer also removes diacritics, so the index stays right
-- even if a row is written by hand. `seq` only gives FTS5 a stable integer
-- rowid (an implicit rowid may change on VACUUM); everything else uses `id`.
-- Embeddings are little-endian f32 vectors, normalised to unit length.
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
);

CREATE UNIQUE INDEX memory_docs_key ON memory_docs (user_id, doc_key) WHERE doc_key IS NOT NULL;
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

-- Embeddings by content hash and model, so storing the same text again (or
-- re-indexing) costs no provider call.
CREATE TABLE memory_embedding_cache (
    content_hash TEXT NOT NULL,
    model        TEXT NOT NULL,
    vector       BLOB NOT NULL,
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
