-- routines_due says "enabled = TRUE" as the shared statements do (SQLite
-- uses a partial index only when the query names its condition the same
-- way; "enabled = 1" left the due-routines lookup scanning the table and
-- sorting), and orders by (next_fire_at, id) as they do, like PostgreSQL's.
DROP INDEX routines_due;
CREATE INDEX routines_due ON routines(next_fire_at, id) WHERE enabled = TRUE;
