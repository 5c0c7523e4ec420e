-- Gateway hardening (issue 21).
--
-- Wrong pairing codes are counted for the whole database, whichever client
-- or daemon received them: at the limit every outstanding code is void
-- until a new one is made on the machine (which sets the count to 0).
INSERT INTO engine_counters (key, value) VALUES ('pairing.wrong_codes', 0);

-- An idempotency claim belongs to the process running its request, for as
-- long as that process renews its lease; a lapsed claim (the process died
-- mid-request) is free again. Claims made before this migration have no
-- lease, so they are free at once.
ALTER TABLE idempotency_keys ADD COLUMN owner TEXT;
ALTER TABLE idempotency_keys ADD COLUMN lease_until BIGINT;
