-- The change signal (issue 23). On SQLite, a write that others must see
-- bumps its topic's counter in its own transaction; a process watching the
-- WAL reads them to learn which topics moved (`routines.version` is the
-- routines topic). PostgreSQL uses NOTIFY and leaves these alone.
INSERT INTO engine_counters (key, value) VALUES ('signal.runs', 0);
INSERT INTO engine_counters (key, value) VALUES ('signal.notifications', 0);
INSERT INTO engine_counters (key, value) VALUES ('signal.jobs', 0);
INSERT INTO engine_counters (key, value) VALUES ('signal.memory', 0);
INSERT INTO engine_counters (key, value) VALUES ('signal.settings', 0);

-- Daemons running on this database, so a command can tell whether one will
-- deliver what it recorded: a row per daemon, written at its start and
-- removed at its stop. Whether it still runs is judged by the backend's
-- own means (its pid on this host for SQLite; its listening connection in
-- pg_stat_activity for PostgreSQL), never by the row alone.
CREATE TABLE daemons (
    id         TEXT PRIMARY KEY,
    pid        BIGINT NOT NULL,
    host       TEXT NOT NULL,
    home       TEXT NOT NULL,
    started_at BIGINT NOT NULL
);
