-- Routines created through the API (source 'api') live beside those of the
-- config file (source 'config'); a sync only creates, updates and deletes
-- config routines. config_hash fingerprints the file's definition of a
-- config routine at the last sync: an edit through the API wins until the
-- file's definition changes.
ALTER TABLE routines ADD COLUMN source TEXT NOT NULL DEFAULT 'config';
ALTER TABLE routines ADD COLUMN config_hash TEXT NOT NULL DEFAULT '';
