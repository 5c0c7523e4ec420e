-- The change signal's topic for API tokens (issue 23): a revoked token's
-- open streams end at once, in any process, instead of at the next poll.
INSERT INTO engine_counters (key, value) VALUES ('signal.tokens', 0);
