-- The chaos test's verdict (scripts/chaos.sh), over the routines named
-- 'chaos-%' (every 1s, catch_up: skip) and the window [:w0, :w1] in
-- microseconds since the epoch. Prints one JSON object; "ok" is the verdict.
--
-- A slot's record is its latest attempt: the first run, or the re-run
-- (attempt 2) a reaper recorded after a crash interrupted the first. A
-- record that is not `skipped` stands for its slot; a skipped one stands
-- for its slot, and one written by the catch-up policy (its reason starts
-- "N slot(s) were missed") for the N one-second slots ending at it. Every
-- whole second in the window must be covered exactly once per routine, no
-- slot may have two completed runs, none may be skipped by the failure
-- backoff (a crash is not the routine's failure), and a slot that did not
-- run says why (a skip reason, or an interrupted run saying "not re-run").
WITH chaos AS (
    SELECT id FROM routines WHERE name LIKE 'chaos-%'
),
runs AS (
    SELECT r.* FROM routine_runs r JOIN chaos c ON c.id = r.routine_id
),
standing AS (
    SELECT * FROM (
        SELECT r.*, ROW_NUMBER() OVER (PARTITION BY routine_id, scheduled_for
                                       ORDER BY attempt DESC) AS latest
        FROM runs r WHERE r.scheduled_for IS NOT NULL
    ) l
    WHERE latest = 1
),
covered AS (
    SELECT s.*,
           CASE
               WHEN status IN ('ok', 'attention', 'failed') AND attempt = 1 THEN 'run'
               WHEN status IN ('ok', 'attention', 'failed') THEN 'rerun'
               WHEN status = 'skipped' AND skip_reason ~ '^[0-9]+ slot\(s\) were missed' THEN 'catch_up'
               ELSE status
           END AS kind,
           CASE
               WHEN status = 'skipped' AND skip_reason ~ '^[0-9]+ slot\(s\) were missed'
               THEN substring(skip_reason FROM '^([0-9]+) slot')::int
               ELSE 1
           END AS span,
           -- Which guardrail refused a skipped record.
           CASE
               WHEN status <> 'skipped' THEN NULL
               WHEN skip_reason LIKE '%then refused: %'
               THEN 'catch_up, then ' || split_part(split_part(skip_reason, 'then refused: ', 2), ':', 1)
               WHEN skip_reason ~ '^[0-9]+ slot\(s\) were missed' THEN 'catch_up'
               WHEN skip_reason LIKE 're-run of a slot%'
               THEN 're-run refused by ' || split_part(split_part(skip_reason, 'refused: ', 2), ':', 1)
               ELSE split_part(skip_reason, ':', 1)
           END AS guardrail
    FROM standing s
),
expanded AS (
    SELECT c.*, c.scheduled_for - g.k * 1000000 AS slot
    FROM covered c
    CROSS JOIN LATERAL generate_series(0, c.span - 1) AS g(k)
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
completed_twice AS (
    SELECT routine_id, scheduled_for FROM runs
    WHERE scheduled_for IS NOT NULL AND status IN ('ok', 'attention', 'failed')
    GROUP BY routine_id, scheduled_for HAVING COUNT(*) > 1
),
missing AS (
    SELECT g.routine_id, g.slot FROM grid g
    LEFT JOIN in_window e ON e.routine_id = g.routine_id AND e.slot = g.slot
    WHERE e.slot IS NULL
),
by_backoff AS (
    SELECT * FROM in_window WHERE status = 'skipped' AND skip_reason LIKE '%backoff:%'
),
without_reason AS (
    SELECT * FROM in_window
    WHERE (status = 'interrupted' AND COALESCE(result_summary, '') NOT LIKE '%not re-run%')
       OR (status = 'skipped' AND skip_reason IS NULL)
       OR status = 'running'
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
    'slots_by_outcome', (SELECT COALESCE(json_object_agg(kind, n), '{}'::json)
                         FROM (SELECT kind, COUNT(*) AS n FROM in_window GROUP BY kind) s),
    'slots_skipped_by_guardrail', (SELECT COALESCE(json_object_agg(guardrail, n), '{}'::json)
                                   FROM (SELECT guardrail, COUNT(*) AS n FROM in_window
                                         WHERE status = 'skipped' GROUP BY guardrail) s),
    'slots_rerun_after_interruption', (SELECT COUNT(*) FROM in_window WHERE attempt = 2),
    'reruns_by_status', (SELECT COALESCE(json_object_agg(status, n), '{}'::json)
                         FROM (SELECT status, COUNT(*) AS n FROM runs WHERE attempt = 2
                               GROUP BY status) s),
    'slots_interrupted_not_rerun', (SELECT COALESCE(json_object_agg(why, n), '{}'::json)
                                    FROM (SELECT split_part(result_summary, '; ', 2) AS why, COUNT(*) AS n
                                          FROM in_window WHERE status = 'interrupted'
                                          GROUP BY why) s),
    'slots_with_two_runs', (SELECT COUNT(*) FROM doubled),
    'slots_with_two_completed_runs', (SELECT COUNT(*) FROM completed_twice),
    'slots_missing', (SELECT COUNT(*) FROM missing),
    'missing_sample', (SELECT COALESCE(json_agg(m), '[]'::json) FROM
                       (SELECT routine_id, to_timestamp(slot / 1000000.0) AS slot FROM missing
                        ORDER BY slot LIMIT 5) m),
    'slots_skipped_by_backoff', (SELECT COUNT(*) FROM by_backoff),
    'slots_without_reason', (SELECT COUNT(*) FROM without_reason),
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
          AND (SELECT COUNT(*) FROM completed_twice) = 0
          AND (SELECT COUNT(*) FROM missing) = 0
          AND (SELECT COUNT(*) FROM by_backoff) = 0
          AND (SELECT COUNT(*) FROM without_reason) = 0
          AND (SELECT COUNT(*) FROM routine_runs WHERE status = 'running') = 0
          AND (SELECT COUNT(*) FROM notes WHERE status <> 'delivered' AND in_inbox = 0) = 0
          AND (SELECT COUNT(*) FROM runs r WHERE r.status = 'ok' AND NOT EXISTS
                 (SELECT 1 FROM notifications n WHERE n.id = r.notification_id)) = 0
);
