-- A fence and an admission as one statement each (schema version 18): PostgreSQL only.

-- On PostgreSQL this version adds two server-side functions, onstation_fence and
-- onstation_admit, so that each of those writes is one statement from the client (see
-- migrations/postgres/0018_fence_and_admission_functions.sql). SQLite runs inside the
-- process, where a statement costs no round trip, and BEGIN IMMEDIATE already holds the
-- writer lock that the functions' first statements take on PostgreSQL: nothing changes here.
-- The version is recorded so that both backends count their schema alike.
