ALTER TABLE routines DROP COLUMN config_hash, DROP COLUMN source;
