DROP INDEX runs_history;
