-- A run's pending approvals (the API's view of a paused run, a finish
-- cancelling them, a decision checking that nothing else is pending) are
-- found through this index; approvals_status (status, expires_at) made
-- each such lookup read every pending approval of every run. The lookups
-- name "status = 'pending'" as the index does.
CREATE INDEX approvals_pending ON approvals(run_id) WHERE status = 'pending';
