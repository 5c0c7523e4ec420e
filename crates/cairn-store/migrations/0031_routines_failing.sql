-- The routines whose failure streak runs. Every run that succeeds resets
-- its routine's streak; a batch of ends reads the routines failing from
-- this index (nearly always none) and resets only those of the batch,
-- where it looked up each routine of the batch (a tenth of a burst's
-- writes for rows that nearly never changed).
CREATE INDEX routines_failing ON routines (id) WHERE consecutive_failures <> 0;
