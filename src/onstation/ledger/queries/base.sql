-- onstation ledger, named queries of the shared base (onstation/ledger/base.py): the history,
-- the row readers and the generation guard every aggregate passes through (see
-- onstation/ledger/named_queries.py). Parameters are ? in every dialect. Times are integer
-- microseconds since the epoch, UTC.

-- name: event_insert
-- Append one event to the history (detail is a JSON object). A batch writes the VALUES row
-- once per event (base.repeat_rows).
INSERT INTO event (node, kind, generation, actor, detail, at) VALUES (?, ?, ?, ?, ?, ?);

-- name: node_lock
-- One node, locked for the rest of the transaction (SQLite: the writer lock already covers
-- it; PostgreSQL locks the row, see postgres/base.sql).
SELECT name, role, spawner, generation, state, created_at, breaker_open, breaker_reason
FROM agent_node WHERE name = ?;

-- name: node_get
-- One node as it stands, unlocked.
SELECT name, role, spawner, generation, state, created_at, breaker_open, breaker_reason
FROM agent_node WHERE name = ?;

-- name: node_row_lock
-- Lock one node's row for the rest of the transaction, its row not read. PostgreSQL runs it
-- (FOR UPDATE, see postgres/base.sql) before node_and_lease; SQLite's writer lock already
-- covers a write, and the code does not run it there.
SELECT 1 FROM agent_node WHERE name = ?;

-- name: node_and_lease
-- One node (the columns of node_get) and the lease of its current generation (the columns of
-- lease_of_generation, NULL when it has none), in one read: the generation guard's.
SELECT n.name, n.role, n.spawner, n.generation, n.state, n.created_at, n.breaker_open,
       n.breaker_reason, l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at,
       l.renewed_at, l.expires_at, l.ended_at, l.end_reason, l.lease_id
FROM agent_node n LEFT JOIN body_lease l ON l.node = n.name AND l.generation = n.generation
WHERE n.name = ?;

-- name: node_lease_and_birth
-- As node_and_lease, and the birth state of the generation that acts (the column of
-- birth_state_of_generation, NULL when it was not born of a relief): a new effect's guard and
-- effect rights in one read. Parameters: the acting generation, the node.
SELECT n.name, n.role, n.spawner, n.generation, n.state, n.created_at, n.breaker_open,
       n.breaker_reason, l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at,
       l.renewed_at, l.expires_at, l.ended_at, l.end_reason, l.lease_id,
       (SELECT b.state FROM birth b WHERE b.node = n.name AND b.generation = ?)
FROM agent_node n LEFT JOIN body_lease l ON l.node = n.name AND l.generation = n.generation
WHERE n.name = ?;

-- name: lease_of_generation
-- The lease of one generation of a node, if any (the last column, run_id, reads the lease id).
SELECT l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at, l.renewed_at,
       l.expires_at, l.ended_at, l.end_reason, l.lease_id
FROM body_lease l WHERE l.node = ? AND l.generation = ?;

-- name: halt_blocking_node
-- The oldest halt in force that covers a node (a global one, or the node's own).
SELECT halt_id, node, by, why, at, lifted_at, lifted_by FROM halt
WHERE lifted_at IS NULL AND (node IS NULL OR node = ?) ORDER BY halt_id LIMIT 1;

-- name: denial_insert
-- Write a denial receipt; returns its id.
INSERT INTO denial (node, presented_generation, current_generation, action, reason, at)
VALUES (?, ?, ?, ?, ?, ?) RETURNING denial_id;

-- name: birth_state_of_generation
-- The birth state of one generation of a node (none when it was not born of a relief).
SELECT state FROM birth WHERE node = ? AND generation = ?;

-- name: lease_end_if_live
-- End a lease that is still LIVE, with its end state and reason.
UPDATE body_lease SET state = ?, ended_at = ?, end_reason = ?
WHERE lease_id = ? AND state = 'LIVE';
