ALTER TABLE routines DROP COLUMN callers;
