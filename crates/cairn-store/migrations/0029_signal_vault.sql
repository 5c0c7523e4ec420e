-- The change signal's topic for the vault (issue 47): a secret stored or
-- removed by `cairn secret` reaches a running daemon's leak detection and
-- `${secret:NAME}` references at once, without a reload.
INSERT INTO engine_counters (key, value) VALUES ('signal.vault', 0);
