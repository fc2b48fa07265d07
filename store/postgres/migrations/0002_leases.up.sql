-- Named leases for work that runs on one node at a time (see core/lease).
-- A lease is free when it has no row or its expires_at has passed.
CREATE TABLE leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);
