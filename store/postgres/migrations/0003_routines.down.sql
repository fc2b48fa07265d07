DROP TABLE routine_history;
DROP TABLE routines;
