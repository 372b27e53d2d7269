-- onstation ledger, PostgreSQL's own versions of named queries of onstation/ledger/base.py
-- (each replaces the portable block of the same name in ../base.sql).

-- name: node_lock
-- One node, its row locked FOR UPDATE for the rest of the transaction.
SELECT name, role, spawner, generation, state, created_at, breaker_open, breaker_reason
FROM agent_node WHERE name = ? FOR UPDATE;

-- name: node_row_lock
-- Lock one node's row (FOR UPDATE) in a statement of its own, sent in the same round trip as
-- the read after it (node_and_lease), whose snapshot is then taken once the lock is held.
SELECT 1 FROM agent_node WHERE name = ? FOR UPDATE;
