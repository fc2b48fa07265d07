DROP INDEX outbox_updated;
DROP INDEX inbox_processed;
DROP INDEX runs_finished;
