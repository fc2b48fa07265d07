-- Retention removes finished runs, processed inbox messages and old outbox
-- sends oldest first, in small batches; these indexes find them without
-- reading the live rows.
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX inbox_processed ON inbox (processed_at) WHERE processed_at IS NOT NULL;
CREATE INDEX outbox_updated ON outbox (updated_at);
