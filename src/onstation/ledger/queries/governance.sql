-- onstation ledger, named queries of the governance aggregate (onstation/ledger/governance.py):
-- the respawn governor, the breaker and the halt gate. The same SQL on every backend (see
-- onstation/ledger/named_queries.py). Parameters are ? in every dialect. Times are integer
-- microseconds since the epoch, UTC.

-- name: respawns_since
-- When each counted respawn of one kind of a node happened, after a moment.
SELECT at FROM respawn WHERE node = ? AND kind = ? AND at > ?;

-- name: respawn_insert
-- Count one respawn.
INSERT INTO respawn (node, at, by, kind) VALUES (?, ?, ?, ?);

-- name: breaker_set
-- Open (1, with its reason) or close (0, no reason) a node's breaker.
UPDATE agent_node SET breaker_open = ?, breaker_reason = ? WHERE name = ?;

-- name: halt_active_in_scope
-- The halt in force for one scope: a node, or global when the node is NULL.
SELECT halt_id, node, by, why, at, lifted_at, lifted_by FROM halt
WHERE lifted_at IS NULL AND (node = ? OR (node IS NULL AND CAST(? AS TEXT) IS NULL));

-- name: halt_insert
-- Raise a halt; returns the new row.
INSERT INTO halt (node, by, why, at) VALUES (?, ?, ?, ?)
RETURNING halt_id, node, by, why, at, lifted_at, lifted_by;

-- name: halt_lift_scope
-- Lift the halt in force for one scope; returns the lifted rows.
UPDATE halt SET lifted_at = ?, lifted_by = ?
WHERE lifted_at IS NULL AND (node = ? OR (node IS NULL AND CAST(? AS TEXT) IS NULL))
RETURNING halt_id, node, by, why, at, lifted_at, lifted_by;

-- name: halts_in_force
-- Every halt in force, oldest first.
SELECT halt_id, node, by, why, at, lifted_at, lifted_by FROM halt
WHERE lifted_at IS NULL ORDER BY halt_id;

-- name: halts_all
-- Every halt on record, oldest first.
SELECT halt_id, node, by, why, at, lifted_at, lifted_by FROM halt ORDER BY halt_id;
