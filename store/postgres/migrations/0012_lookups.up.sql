-- Indexes that answer the hot lookups exactly, so that the planner takes
-- them whatever its statistics say (a new table, autovacuum off or behind).
--
-- A run's history (the session's completed runs before it, newest first)
-- is read at the start of every turn. With runs_session (session_id, pk)
-- and runs_status (status, pk) alone, the planner chose runs_status and
-- read every completed run of every session before the run.
CREATE INDEX runs_history ON runs (session_id, pk) WHERE status = 'completed';

-- A finish cancels its run's pending approvals, a decision resumes the run
-- when none of its approvals is pending any more, and the API's view of a
-- paused run lists them (in pk order). Each read every pending approval of
-- every run through approvals_due or approvals_status.
CREATE INDEX approvals_pending ON approvals (run_id, pk) WHERE status = 'pending';
