-- onstation ledger, PostgreSQL's own versions of named queries of onstation/ledger/base.py
-- (each replaces the portable block of the same name in ../base.sql).

-- name: node_lock
-- One node, its row locked FOR UPDATE for the rest of the transaction.
SELECT name, role, spawner, generation, state, created_at, breaker_open, breaker_reason
FROM agent_node WHERE name = ? FOR UPDATE;
