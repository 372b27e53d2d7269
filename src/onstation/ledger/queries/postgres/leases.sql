-- onstation ledger, PostgreSQL's own versions of the lease records' named queries
-- (onstation/ledger/leases.py; the portable ones are in queries/leases.sql). A fence and an
-- admission must lock first and read after, each in a statement of its own (at READ
-- COMMITTED a statement reads one snapshot, taken before any lock wait); the server-side
-- functions of schema version 18 run both, so the client sends one statement.

-- name: pg_admit
-- A body admitted for the node's current generation, in one statement: the server-side
-- function of schema version 18 (migrations/postgres/0018_fence_and_admission_functions.sql)
-- locks the node and shares the halt gate, then reads and admits only where the read allows
-- it (node, holder, now, expiry, expected generation or NULL, actor, the event's detail as
-- JSON). The read's eight columns and the new lease id (NULL when nothing was admitted); no
-- row when the node does not exist.
SELECT * FROM onstation_admit(?, ?, ?, ?, ?, ?, ?);

-- name: pg_fence
-- The whole fence in one statement: the server-side function of schema version 18 locks the
-- node, then compares and swaps its generation and, only when it matched, ends its LIVE
-- leases, revokes its LIVE grants of the fenced generation and older and records node.fenced
-- (node, expected generation, now, reason, actor). One row (none when the CAS lost): the new
-- generation, the fenced lease ids, their generations (in lease id order), the revoked grant
-- ids.
SELECT * FROM onstation_fence(?, ?, ?, ?, ?);

