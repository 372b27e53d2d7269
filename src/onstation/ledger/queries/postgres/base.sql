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

-- name: node_and_lease
-- As the portable node_and_lease, the lease through a LATERAL subquery kept apart (OFFSET 0)
-- so that it is found by its (node, generation) key: as a plain join the planner may read
-- every lease of the node by name and filter on the generation (a cost growing with the
-- node's history).
SELECT n.name, n.role, n.spawner, n.generation, n.state, n.created_at, n.breaker_open,
       n.breaker_reason, l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at,
       l.renewed_at, l.expires_at, l.ended_at, l.end_reason, l.lease_id
FROM agent_node n LEFT JOIN LATERAL (
    SELECT * FROM body_lease b WHERE b.node = n.name AND b.generation = n.generation OFFSET 0
) l ON true
WHERE n.name = ?;

-- name: node_lease_and_birth
-- As the portable node_lease_and_birth, the lease found by its key as in node_and_lease.
SELECT n.name, n.role, n.spawner, n.generation, n.state, n.created_at, n.breaker_open,
       n.breaker_reason, l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at,
       l.renewed_at, l.expires_at, l.ended_at, l.end_reason, l.lease_id,
       (SELECT b.state FROM birth b WHERE b.node = n.name AND b.generation = ?)
FROM agent_node n LEFT JOIN LATERAL (
    SELECT * FROM body_lease b WHERE b.node = n.name AND b.generation = n.generation OFFSET 0
) l ON true
WHERE n.name = ?;
