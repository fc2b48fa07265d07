-- Messages still waiting for the processor are dropped: the schema before
-- this migration keeps only the messages that started a run.
DELETE FROM inbox WHERE processed_at IS NULL;
DROP INDEX inbox_waiting;
ALTER TABLE inbox
    DROP COLUMN attempts,
    DROP COLUMN claim_until,
    DROP COLUMN claimed_by,
    DROP COLUMN error,
    DROP COLUMN processed_at,
    DROP COLUMN payload,
    DROP COLUMN seq,
    ALTER COLUMN run_id DROP DEFAULT;
ALTER TABLE inbox RENAME COLUMN received_at TO created_at;
