-- The chaos test's verdict (scripts/chaos.sh), over the routines named
-- 'chaos-%' (every 1s, catch_up: skip) and the window [:w0, :w1] in
-- microseconds since the epoch. Prints one JSON object; "ok" is the verdict.
--
-- Coverage: a run that is not `skipped` stands for its slot; a skipped run
-- stands for its slot, and one written by the catch-up policy (its reason
-- starts "N slot(s) were missed") for the N one-second slots ending at it.
-- Every whole second in the window must be covered exactly once per routine.
WITH chaos AS (
    SELECT id FROM routines WHERE name LIKE 'chaos-%'
),
runs AS (
    SELECT r.* FROM routine_runs r JOIN chaos c ON c.id = r.routine_id
),
covered AS (
    SELECT routine_id, scheduled_for AS slot, status, 1 AS n,
           CASE
               WHEN status <> 'skipped' THEN 'run'
               WHEN skip_reason ~ '^[0-9]+ slot\(s\) were missed' THEN 'catch_up'
               ELSE 'guardrail'
           END AS kind
    FROM runs
    WHERE scheduled_for IS NOT NULL
),
expanded AS (
    SELECT c.routine_id, c.slot - g.k * 1000000 AS slot, c.kind
    FROM covered c
    JOIN runs r ON r.routine_id = c.routine_id AND r.scheduled_for = c.slot
    CROSS JOIN LATERAL generate_series(
        0,
        CASE WHEN c.kind = 'catch_up'
             THEN substring(r.skip_reason FROM '^([0-9]+) slot')::int - 1
             ELSE 0 END
    ) AS g(k)
),
grid AS (
    SELECT c.id AS routine_id, s * 1000000 AS slot
    FROM chaos c
    CROSS JOIN generate_series(CEIL(:w0 / 1000000.0)::bigint, FLOOR(:w1 / 1000000.0)::bigint) AS s
),
in_window AS (
    SELECT e.* FROM expanded e WHERE e.slot BETWEEN :w0 AND :w1
),
doubled AS (
    SELECT routine_id, slot FROM in_window GROUP BY routine_id, slot HAVING COUNT(*) > 1
),
missing AS (
    SELECT g.routine_id, g.slot FROM grid g
    LEFT JOIN in_window e ON e.routine_id = g.routine_id AND e.slot = g.slot
    WHERE e.slot IS NULL
),
notes AS (
    SELECT n.* FROM notifications n WHERE n.source LIKE 'routine:%'
)
SELECT json_build_object(
    'routines', (SELECT COUNT(*) FROM chaos),
    'window_secs', ROUND((:w1 - :w0) / 1000000.0, 1),
    'slots_in_window', (SELECT COUNT(*) FROM grid),
    'runs', (SELECT COUNT(*) FROM runs),
    'runs_by_status', (SELECT COALESCE(json_object_agg(status, n), '{}'::json)
                       FROM (SELECT status, COUNT(*) AS n FROM runs GROUP BY status) s),
    'slots_by_kind', (SELECT COALESCE(json_object_agg(kind, n), '{}'::json)
                      FROM (SELECT kind, COUNT(*) AS n FROM in_window GROUP BY kind) s),
    'slots_with_two_runs', (SELECT COUNT(*) FROM doubled)
        + (SELECT COUNT(*) FROM (SELECT routine_id, scheduled_for FROM runs
                                 WHERE scheduled_for IS NOT NULL
                                 GROUP BY routine_id, scheduled_for HAVING COUNT(*) > 1) d),
    'slots_missing', (SELECT COUNT(*) FROM missing),
    'missing_sample', (SELECT COALESCE(json_agg(m), '[]'::json) FROM
                       (SELECT routine_id, to_timestamp(slot / 1000000.0) AS slot FROM missing
                        ORDER BY slot LIMIT 5) m),
    'runs_left_running', (SELECT COUNT(*) FROM routine_runs WHERE status = 'running'),
    'notifications', (SELECT COUNT(*) FROM notes),
    'notifications_by_status', (SELECT COALESCE(json_object_agg(status, n), '{}'::json)
                                FROM (SELECT status, COUNT(*) AS n FROM notes GROUP BY status) s),
    'notifications_undelivered', (SELECT COUNT(*) FROM notes
                                  WHERE status <> 'delivered' AND in_inbox = 0),
    'ok_runs_without_notification', (SELECT COUNT(*) FROM runs r
                                     WHERE r.status = 'ok' AND NOT EXISTS
                                       (SELECT 1 FROM notifications n
                                        WHERE n.id = r.notification_id)),
    'ok', (SELECT COUNT(*) FROM doubled) = 0
          AND (SELECT COUNT(*) FROM missing) = 0
          AND (SELECT COUNT(*) FROM routine_runs WHERE status = 'running') = 0
          AND (SELECT COUNT(*) FROM notes WHERE status <> 'delivered' AND in_inbox = 0) = 0
          AND (SELECT COUNT(*) FROM runs r WHERE r.status = 'ok' AND NOT EXISTS
                 (SELECT 1 FROM notifications n WHERE n.id = r.notification_id)) = 0
);
