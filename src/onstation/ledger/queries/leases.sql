-- onstation ledger, named queries of the lease records (onstation/ledger/leases.py): body
-- leases, the fence, denials and capability grants. Portable SQL, as SQLite runs it; the
-- PostgreSQL versions of the row-locking and one-round-trip statements are in
-- queries/postgres/leases.sql (see onstation/ledger/named_queries.py). Parameters are ? in every
-- dialect. Times are integer microseconds since the epoch, UTC. A lease row is read in the
-- column order LedgerBase._lease expects: lease_id, node, generation, state, holder,
-- acquired_at, renewed_at, expires_at, ended_at, end_reason, and lease_id again as the run id.

-- name: lease_admission_read
-- Admission in one read: the node's generation and state, its current generation's lease
-- (id, state, expiry, holder), the oldest halt in force over it, and its open episode.
SELECT n.generation, n.state, l.lease_id, l.state, l.expires_at, l.holder,
       (SELECT h.halt_id FROM halt h WHERE h.lifted_at IS NULL
         AND (h.node IS NULL OR h.node = n.name) ORDER BY h.halt_id LIMIT 1),
       (SELECT e.episode_id FROM work_episode e WHERE e.node = n.name
         AND e.state = 'OPEN')
FROM agent_node n LEFT JOIN body_lease l
ON l.node = n.name AND l.generation = n.generation WHERE n.name = ?;

-- name: lease_admit_if_allowed
-- Admit a body when admission is allowed, in one statement: a LIVE lease (acquired and renewed now) for
-- the node's current generation when the node is ACTIVE, no halt in force covers it, that
-- generation has no lease yet and it is the expected one (when one is given). Returns
-- lease_id, generation; no row when nothing was admitted (lease_admission_read says why).
-- Parameters: holder, now, now, expires_at, node, expected generation (twice; NULL for any).
INSERT INTO body_lease (node, generation, state, holder, acquired_at,
                        renewed_at, expires_at, episode_id)
SELECT n.name, n.generation, 'LIVE', ?, ?, ?, ?,
       (SELECT e.episode_id FROM work_episode e WHERE e.node = n.name AND e.state = 'OPEN')
FROM agent_node n
WHERE n.name = ? AND n.state = 'ACTIVE' AND (? IS NULL OR n.generation = ?)
  AND NOT EXISTS (SELECT 1 FROM halt h WHERE h.lifted_at IS NULL
                  AND (h.node IS NULL OR h.node = n.name))
  AND NOT EXISTS (SELECT 1 FROM body_lease l WHERE l.node = n.name
                  AND l.generation = n.generation)
RETURNING lease_id, generation;

-- name: lease_hand_over
-- Give a LIVE lease to another holder (compare-and-swap on the holder); returns its generation.
UPDATE body_lease SET holder = ?
WHERE lease_id = ? AND node = ? AND holder = ? AND state = 'LIVE'
RETURNING generation;

-- name: lease_renew
-- Extend a lease (a heartbeat): renewed now, expiring later; returns the lease as it is now.
UPDATE body_lease SET renewed_at = ?, expires_at = ? WHERE lease_id = ?
RETURNING lease_id, node, generation, state, holder, acquired_at, renewed_at, expires_at,
          ended_at, end_reason, lease_id;

-- name: leases_of_node
-- Every lease a node ever had, oldest generation first.
SELECT l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at, l.renewed_at,
       l.expires_at, l.ended_at, l.end_reason, l.lease_id
FROM body_lease l WHERE l.node = ? ORDER BY l.generation;

-- name: lease_nodes_with_many_live
-- Nodes holding more than one LIVE lease, with the count (empty unless the ledger is broken).
SELECT node, count(*) FROM body_lease WHERE state = 'LIVE'
GROUP BY node HAVING count(*) > 1 ORDER BY node;

-- name: fence_bump_generation
-- The fence's compare-and-swap: the node's generation from the expected one to the next.
-- Returns the new generation, the node's LIVE lease (its id and generation; NULL when none,
-- and never more than one, by body_lease_one_live) and whether a LIVE grant of the fenced
-- generation or older exists, read before anything is ended; no row when the expected
-- generation is not current.
UPDATE agent_node SET generation = generation + 1
WHERE name = ? AND generation = ?
RETURNING generation,
    (SELECT l.lease_id FROM body_lease l WHERE l.node = agent_node.name AND l.state = 'LIVE'),
    (SELECT l.generation FROM body_lease l WHERE l.node = agent_node.name AND l.state = 'LIVE'),
    EXISTS (SELECT 1 FROM capability_grant g WHERE g.node = agent_node.name
            AND g.state = 'LIVE' AND g.generation < agent_node.generation);

-- name: fence_revoke_leases
-- End a node's LIVE leases as FENCED (now, with a reason); fence_bump_generation read them.
UPDATE body_lease SET state = 'FENCED', ended_at = ?, end_reason = ?
WHERE node = ? AND state = 'LIVE';

-- name: fence_revoke_grants
-- Revoke a node's LIVE grants of the fenced generation and older (now); returns grant_id.
UPDATE capability_grant SET state = 'REVOKED', revoked_at = ?
WHERE node = ? AND state = 'LIVE' AND generation <= ?
RETURNING grant_id;


-- name: denials_of_node
-- Every denial receipt of a node, oldest first.
SELECT denial_id, node, presented_generation, current_generation, action, reason, at
FROM denial WHERE node = ? ORDER BY denial_id;

-- name: grant_insert
-- Issue a LIVE capability grant to one generation of a node; returns grant_id and capability,
-- or no row when that generation was already granted that capability (its key: node,
-- generation, capability). A batch writes the VALUES row once per grant (base.repeat_rows).
INSERT INTO capability_grant (node, generation, capability, state, issued_at)
VALUES (?, ?, ?, 'LIVE', ?)
ON CONFLICT (node, generation, capability) DO NOTHING
RETURNING grant_id, capability;

-- name: grants_of_node
-- Every grant a node's generations received, oldest first.
SELECT grant_id, node, generation, capability, state, issued_at, revoked_at
FROM capability_grant WHERE node = ? ORDER BY grant_id;

-- name: live_grants_of_generation
-- The capabilities one generation of a node holds now (LIVE grants), by capability.
SELECT capability FROM capability_grant
WHERE node = ? AND state = 'LIVE' AND generation = ?
ORDER BY capability;
