DROP INDEX approvals_pending;
DROP INDEX runs_history;
