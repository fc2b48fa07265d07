-- A lease's end is named as on PostgreSQL, so one statement serves both.
ALTER TABLE leases RENAME COLUMN until TO expires_at;
