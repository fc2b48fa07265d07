ALTER TABLE routines DROP COLUMN changed_by;
