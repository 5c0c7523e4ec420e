-- The vault (issue 47): secrets stored with `cairn secret set`, sealed with
-- XChaCha20-Poly1305 (cairn-store/src/vault). Only ciphertext is kept: the
-- nonce and the sealed value (tag included) as base64, the name as the
-- associated data, and the fingerprint of the key that sealed it, so a
-- wrong key is named and a key rotation can resume after a crash.
CREATE TABLE vault_secrets (
    name         TEXT PRIMARY KEY,
    nonce        TEXT NOT NULL,
    ciphertext   TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    last_used_at BIGINT
);
