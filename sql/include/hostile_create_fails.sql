-- include/hostile_create_fails.sql: CREATE EXTENSION dlock, which a plant must make fail; its SQLSTATE, and what it left behind (nothing)
\set VERBOSITY sqlstate
CREATE EXTENSION dlock;
\echo :LAST_ERROR_MESSAGE
\set VERBOSITY terse
SELECT pg_temp.leftovers() AS leftovers;
