-- The running runs of a routine, found without reading its ended ones:
-- the per-routine concurrency count of every admission and the claim's
-- read of the runs going. A routine at its retention (200 runs by default)
-- otherwise has each of them read every run it keeps.
CREATE INDEX routine_runs_running_by_routine ON routine_runs (routine_id)
    WHERE status = 'running';
