-- A run's history (the session's completed runs before it, newest first)
-- is read at the start of every turn. Its lookup names session_id, status
-- and pk; with runs_session (session_id, pk) and runs_status (status, pk)
-- alone, a planner without fresh statistics (a new table, autovacuum off
-- or behind) chose runs_status and read every completed run of every
-- session before the run: each turn cost as much as the table was long.
-- This index answers the lookup exactly, so it is the cheapest whatever
-- the statistics say.
CREATE INDEX runs_history ON runs (session_id, pk) WHERE status = 'completed';
