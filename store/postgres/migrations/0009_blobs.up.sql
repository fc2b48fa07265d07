-- Attachments' bytes, named by their content (sha256-<hex>).
CREATE TABLE blobs (
    id         text PRIMARY KEY,
    data       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
