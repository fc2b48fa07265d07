-- Who may trigger a routine on demand: its callers, one per line ('' =
-- anyone).
ALTER TABLE routines ADD COLUMN callers text NOT NULL DEFAULT '';
