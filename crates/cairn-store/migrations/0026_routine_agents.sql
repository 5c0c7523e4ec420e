-- The agent a routine runs as (issue 45): an id of `[[agents]]`; NULL is
-- `main`, as every routine from before agents is.
ALTER TABLE routines ADD COLUMN agent TEXT;
