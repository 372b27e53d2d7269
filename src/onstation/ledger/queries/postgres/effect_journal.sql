-- onstation ledger, PostgreSQL's own versions of named queries of
-- onstation/ledger/effect_journal.py (each replaces the portable block of the same name in
-- ../effect_journal.sql).

-- name: effect_node_row_lock
-- Lock the row of the node one effect belongs to (FOR UPDATE) in a statement of its own, sent
-- in the same round trip as the read after it (effect_and_guard), whose snapshot is then taken
-- once the lock is held: a fence or an admission committed while it waited is seen.
SELECT 1 FROM agent_node WHERE name = (SELECT node FROM effect WHERE effect_id = ?) FOR UPDATE;

-- name: effect_and_guard
-- As the portable effect_and_guard, the lease through a LATERAL subquery kept apart (OFFSET 0)
-- so that it is found by its (node, generation) key, as in node_and_lease.
SELECT e.effect_id, e.node, e.generation, e.fingerprint, e.operation, e.destination,
       e.arguments, e.approval_slot, e.caller_ref, e.state, e.result, e.created_at,
       e.updated_at, e.resolved_by, e.resolution, e.repeat_of, e.repeat_reason,
       n.name, n.role, n.spawner, n.generation, n.state, n.created_at, n.breaker_open,
       n.breaker_reason, l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at,
       l.renewed_at, l.expires_at, l.ended_at, l.end_reason, l.lease_id,
       (SELECT b.state FROM birth b WHERE b.node = e.node AND b.generation = ?)
FROM effect e JOIN agent_node n ON n.name = e.node
LEFT JOIN LATERAL (
    SELECT * FROM body_lease b WHERE b.node = n.name AND b.generation = n.generation OFFSET 0
) l ON true
WHERE e.effect_id = ?;
