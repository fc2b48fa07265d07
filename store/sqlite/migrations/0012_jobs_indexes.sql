-- jobs_key holds only waiting jobs, as on PostgreSQL, and the coalescing
-- lookup (coalesceStmt) names each of its terms, so SQLite uses it: before,
-- the index's "key <> ''" was not implied by "key = ?" and every keyed
-- enqueue scanned the live jobs. A job leased as it is created (a run handed
-- to a worker) no longer writes a page of it, nor of jobs_consumer: jobs are
-- looked up by consumer only when a gateway starts and stops (Recover), over
-- the live jobs.
DROP INDEX jobs_key;
DROP INDEX jobs_consumer;
CREATE INDEX jobs_key ON jobs(key) WHERE dead_at IS NULL AND consumer = '' AND key <> '';
