-- onstation ledger, named queries of the effect journal (onstation/ledger/effect_journal.py):
-- intend, dispatch, observe, reconcile and resolve side effects. The same SQL on every backend
-- (see onstation/ledger/named_queries.py). Parameters are ? in every dialect. Times are integer
-- microseconds since the epoch, UTC. An effect row is read in the column order
-- LedgerBase._effect expects: effect_id, node, generation, fingerprint, operation, destination,
-- arguments, approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
-- resolution, repeat_of, repeat_reason.

-- name: effect_by_fingerprint
-- The effect recorded under one fingerprint (none or one row).
SELECT effect_id, node, generation, fingerprint, operation, destination, arguments,
       approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
       resolution, repeat_of, repeat_reason
FROM effect WHERE fingerprint = ?;

-- name: effect_original_by_identity
-- The oldest effect (not a repeat) with this node, operation, destination and arguments: finds
-- an effect recorded before schema 5 under a slot, whose fingerprint has the slot in it.
SELECT effect_id, node, generation, fingerprint, operation, destination, arguments,
       approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
       resolution, repeat_of, repeat_reason
FROM effect
WHERE node = ? AND operation = ? AND destination = ? AND arguments = ? AND repeat_of IS NULL
ORDER BY created_at, effect_id LIMIT 1;

-- name: effect_reintend
-- Intend an undispatched (or failed or compensated) effect again, under a generation at a time;
-- returns the effect as it is now (the columns of effect_by_id).
UPDATE effect SET state = 'INTENDED', generation = ?, updated_at = ?,
       resolved_by = NULL, resolution = NULL
WHERE effect_id = ?
RETURNING effect_id, node, generation, fingerprint, operation, destination, arguments,
          approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
          resolution, repeat_of, repeat_reason;

-- name: effect_insert_intended
-- Record a new INTENDED effect: id, node, generation, fingerprint, operation, destination,
-- arguments, approval slot, caller reference, created and updated at, repeat_of, repeat reason;
-- returns it (the columns of effect_by_id).
INSERT INTO effect (effect_id, node, generation, fingerprint, operation, destination, arguments,
                    approval_slot, caller_ref, state, result, created_at, updated_at,
                    resolved_by, resolution, repeat_of, repeat_reason)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'INTENDED', NULL, ?, ?, NULL, NULL, ?, ?)
RETURNING effect_id, node, generation, fingerprint, operation, destination, arguments,
          approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
          resolution, repeat_of, repeat_reason;

-- name: effect_ambiguous_of_original
-- The first AMBIGUOUS effect among an original effect (its id) and its repeats (the same id).
SELECT effect_id FROM effect
WHERE (effect_id = ? OR repeat_of = ?) AND state = 'AMBIGUOUS'
ORDER BY effect_id LIMIT 1;

-- name: effect_by_id
-- One effect by id (none or one row).
SELECT effect_id, node, generation, fingerprint, operation, destination, arguments,
       approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
       resolution, repeat_of, repeat_reason
FROM effect WHERE effect_id = ?;

-- name: effect_node_row_lock
-- Lock the row of the node one effect belongs to, its row not read. PostgreSQL runs it (FOR
-- UPDATE, see postgres/effect_journal.sql) before effect_and_guard, as node_row_lock before
-- node_and_lease; SQLite's writer lock already covers a write, and the code does not run it
-- there.
SELECT 1 FROM agent_node WHERE name = (SELECT node FROM effect WHERE effect_id = ?);

-- name: effect_and_guard
-- An effect step's reads in one: the effect (the columns of effect_by_id), its node and the
-- lease of the node's current generation (the columns of node_and_lease), and the birth state
-- of the generation that acts (birth_state_of_generation; NULL when it was not born of a
-- relief). Parameters: the acting generation, the effect id.
SELECT e.effect_id, e.node, e.generation, e.fingerprint, e.operation, e.destination,
       e.arguments, e.approval_slot, e.caller_ref, e.state, e.result, e.created_at,
       e.updated_at, e.resolved_by, e.resolution, e.repeat_of, e.repeat_reason,
       n.name, n.role, n.spawner, n.generation, n.state, n.created_at, n.breaker_open,
       n.breaker_reason, l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at,
       l.renewed_at, l.expires_at, l.ended_at, l.end_reason, l.lease_id,
       (SELECT b.state FROM birth b WHERE b.node = e.node AND b.generation = ?)
FROM effect e JOIN agent_node n ON n.name = e.node
LEFT JOIN body_lease l ON l.node = n.name AND l.generation = n.generation
WHERE e.effect_id = ?;

-- name: effect_advance
-- Move an effect from the state it was read in to the next one, keeping its result unless a
-- new one is given; returns the effect as it is now (the columns of effect_by_id), no row if
-- the state moved meanwhile.
UPDATE effect SET state = ?, updated_at = ?, result = COALESCE(?, result)
WHERE effect_id = ? AND state = ?
RETURNING effect_id, node, generation, fingerprint, operation, destination, arguments,
          approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
          resolution, repeat_of, repeat_reason;

-- name: effect_unsettled_of_fenced_generations
-- A node's INTENDED, DISPATCHED and OBSERVED effects of generations before a given one, oldest
-- first: what a reconcile settles.
SELECT effect_id, node, generation, fingerprint, operation, destination, arguments,
       approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
       resolution, repeat_of, repeat_reason
FROM effect
WHERE node = ? AND generation < ? AND state IN ('INTENDED', 'DISPATCHED', 'OBSERVED')
ORDER BY created_at, effect_id;

-- name: effect_dispatch_denied_for_good
-- Whether a generation of a node was denied an action (an effect's dispatch) for one of four
-- reasons that end the generation; a row of 1 if it was.
SELECT 1 FROM denial
WHERE node = ? AND presented_generation = ? AND action = ? AND reason IN (?, ?, ?, ?)
LIMIT 1;

-- name: effect_set_state
-- Set an effect's state, as a reconcile settles it.
UPDATE effect SET state = ?, updated_at = ? WHERE effect_id = ?;

-- name: effect_ambiguous_ids_of_node
-- The ids of a node's AMBIGUOUS effects, in id order.
SELECT effect_id FROM effect WHERE node = ? AND state = 'AMBIGUOUS' ORDER BY effect_id;

-- name: effect_resolve
-- An operator's settlement of an effect: its new state, when, by whom and the resolution.
UPDATE effect SET state = ?, updated_at = ?, resolved_by = ?, resolution = ?
WHERE effect_id = ?;

-- name: effects_of_node
-- A node's effects, oldest first.
SELECT effect_id, node, generation, fingerprint, operation, destination, arguments,
       approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
       resolution, repeat_of, repeat_reason
FROM effect WHERE node = ? ORDER BY created_at, effect_id;

-- name: effects_of_node_in_state
-- A node's effects in one state, oldest first.
SELECT effect_id, node, generation, fingerprint, operation, destination, arguments,
       approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
       resolution, repeat_of, repeat_reason
FROM effect WHERE node = ? AND state = ? ORDER BY created_at, effect_id;

-- name: effects_of_node_open
-- A node's effects still open (not settled), oldest first: through the (node, state) index,
-- so the cost is the open effects', not the node's whole history.
SELECT effect_id, node, generation, fingerprint, operation, destination, arguments,
       approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by,
       resolution, repeat_of, repeat_reason
FROM effect WHERE node = ? AND state IN ('INTENDED', 'DISPATCHED', 'OBSERVED', 'AMBIGUOUS')
ORDER BY created_at, effect_id;

-- name: effect_call_delete
-- Forget the call an effect was last dispatched by (it is dispatched by another now).
DELETE FROM effect_call WHERE effect_id = ?;

-- name: effect_call_insert
-- The call that dispatched an effect: effect id, node, generation, session, tool_use_id, tool
-- name, input digest, transcript path and offset, how to ask the destination (JSON), when.
INSERT INTO effect_call (effect_id, node, generation, session_id, tool_use_id, tool_name,
                         input_digest, transcript_path, transcript_offset, observe, at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: effect_calls_dispatched_of_generation
-- A node's DISPATCHED effects of one generation with the call that dispatched each (its
-- columns NULL when none was recorded), oldest first; from the node's row, so that one
-- statement also says whether the node exists: no row when it does not, one row of NULLs
-- when it has no such effect. Parameters: generation, node.
SELECT e.effect_id, e.generation, e.operation, e.arguments, c.session_id, c.tool_use_id,
       c.tool_name, c.input_digest, c.transcript_path, c.transcript_offset, c.observe
FROM agent_node n
LEFT JOIN effect e ON e.node = n.name AND e.generation = ? AND e.state = 'DISPATCHED'
LEFT JOIN effect_call c ON c.effect_id = e.effect_id
WHERE n.name = ?
ORDER BY e.created_at, e.effect_id;

-- name: effect_calls_dispatched_of_fenced_generations
-- A node's DISPATCHED effects of generations before its current one, with their calls,
-- oldest first: what a reconcile may settle by asking the destination. Parameters: node, node.
SELECT e.effect_id, e.generation, e.operation, e.arguments, c.session_id, c.tool_use_id,
       c.tool_name, c.input_digest, c.transcript_path, c.transcript_offset, c.observe
FROM effect e LEFT JOIN effect_call c ON c.effect_id = e.effect_id
WHERE e.node = ? AND e.generation < (SELECT generation FROM agent_node WHERE name = ?)
  AND e.state = 'DISPATCHED'
ORDER BY e.created_at, e.effect_id;
