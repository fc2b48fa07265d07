-- The inbox becomes inbox-first: a chat adapter appends every inbound
-- message (payload, received_at) before it acknowledges the delivery, and
-- an inbox processor turns waiting messages (processed_at NULL) into runs
-- in received order. CreateRun marks a message processed (run_id,
-- processed_at) in the run's transaction; a message that needs no run, or
-- cannot be processed, is marked with processed_at (and error). A claim
-- (claimed_by until claim_until) keeps two replicas off one message;
-- attempts counts claims. Rows of runs created before this migration are
-- processed.
ALTER TABLE inbox RENAME COLUMN created_at TO received_at;
ALTER TABLE inbox
    ALTER COLUMN run_id SET DEFAULT '',
    ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN payload bytea,
    ADD COLUMN processed_at timestamptz,
    ADD COLUMN error text NOT NULL DEFAULT '',
    ADD COLUMN claimed_by text NOT NULL DEFAULT '',
    ADD COLUMN claim_until timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN attempts integer NOT NULL DEFAULT 0;
UPDATE inbox SET processed_at = received_at;
CREATE INDEX inbox_waiting ON inbox (platform, received_at, seq) WHERE processed_at IS NULL;
