-- onstation ledger, PostgreSQL's own versions of the lease records' named queries
-- (onstation/ledger/leases.py; the portable ones are in queries/leases.sql). At READ COMMITTED
-- each statement takes a fresh snapshot, so the locks are taken in a statement of their own
-- before the statement that must see what was committed while it waited.

-- name: lease_admission_lock
-- Lock the node and take the halt gate in share mode before the admission read, so that the
-- read's snapshot (taken after the locks) sees a halt or a lease committed while we waited.
SELECT n.generation FROM agent_node n CROSS JOIN gate g WHERE n.name = ?
FOR UPDATE OF n FOR SHARE OF g;

-- name: pg_lease_admit
-- Admission in one round trip, after lease_admission_lock: the admission read (as
-- lease_admission_read: generation, state, current lease id, state, expiry and holder, the
-- oldest halt in force, the open episode) and, only when it allows admission (node ACTIVE,
-- no halt, no lease for its generation yet, the generation the expected one when one is
-- given), the LIVE lease (as lease_admit_if_allowed) and its lease.acquired event, its detail the
-- given JSON plus the new lease_id. Returns the read's eight columns and the new lease_id
-- (NULL when nothing was admitted); no row when the node does not exist.
WITH r AS (
    SELECT n.name, n.generation, n.state, l.lease_id, l.state AS lease_state, l.expires_at,
           l.holder,
           (SELECT h.halt_id FROM halt h WHERE h.lifted_at IS NULL
             AND (h.node IS NULL OR h.node = n.name) ORDER BY h.halt_id LIMIT 1) AS halt_id,
           (SELECT e.episode_id FROM work_episode e WHERE e.node = n.name
             AND e.state = 'OPEN') AS episode_id
    -- The lease through a LATERAL subquery kept apart (OFFSET 0): found by its
    -- (node, generation) key. As a plain join the planner may read every lease of the node
    -- by name and filter on the generation, a cost that grows with the node's history.
    FROM agent_node n LEFT JOIN LATERAL (
        SELECT l.lease_id, l.state, l.expires_at, l.holder FROM body_lease l
        WHERE l.node = n.name AND l.generation = n.generation OFFSET 0) l ON true
    WHERE n.name = ?),
lease AS (
    INSERT INTO body_lease (node, generation, state, holder, acquired_at,
                            renewed_at, expires_at, episode_id)
    SELECT r.name, r.generation, 'LIVE', ?, ?, ?, ?, r.episode_id FROM r
    WHERE r.state = 'ACTIVE' AND r.halt_id IS NULL AND r.lease_id IS NULL
      AND (CAST(? AS bigint) IS NULL OR r.generation = CAST(? AS bigint))
    RETURNING lease_id, node, generation),
history AS (
    INSERT INTO event (node, kind, generation, actor, detail, at)
    SELECT node, 'lease.acquired', generation, ?,
           (CAST(? AS jsonb) || jsonb_build_object('lease_id', lease_id))::text, ?
    FROM lease)
SELECT r.generation, r.state, r.lease_id, r.lease_state, r.expires_at, r.holder, r.halt_id,
       r.episode_id, (SELECT lease_id FROM lease)
FROM r;

-- name: fence_node_lock
-- Lock the node before pg_fence_cas_revoke, so that its snapshot sees every lease admitted before
-- us (a data-modifying CTE reads one snapshot, taken before any lock wait).
SELECT generation FROM agent_node WHERE name = ? FOR UPDATE;

-- name: pg_fence_cas_revoke
-- The whole fence in one round trip: the compare-and-swap of the generation (which takes the
-- node's row lock), then, only when it matched, the node's LIVE leases ended as FENCED, its
-- LIVE grants of the fenced generation and older revoked, and the node.fenced event (actor,
-- previous generation, reason, and what was revoked). Returns one row (none when the CAS
-- lost): the new generation, the fenced lease ids, their generations (in lease id order) and
-- the revoked grant ids, as arrays. Parameters: node, expected generation, now, reason, now,
-- expected generation, actor, expected generation, reason, now.
WITH bumped AS (
    UPDATE agent_node SET generation = generation + 1
    WHERE name = ? AND generation = ?
    RETURNING name, generation),
fenced AS (
    UPDATE body_lease SET state = 'FENCED', ended_at = ?, end_reason = ?
    WHERE node IN (SELECT name FROM bumped) AND state = 'LIVE'
    RETURNING lease_id, generation),
grants AS (
    UPDATE capability_grant SET state = 'REVOKED', revoked_at = ?
    WHERE node IN (SELECT name FROM bumped) AND state = 'LIVE' AND generation <= ?
    RETURNING grant_id),
summary AS (
    SELECT b.name, b.generation,
           (SELECT coalesce(array_agg(lease_id ORDER BY lease_id), '{}') FROM fenced) AS leases,
           (SELECT coalesce(array_agg(generation ORDER BY lease_id), '{}') FROM fenced)
               AS lease_generations,
           (SELECT coalesce(array_agg(generation ORDER BY generation), '{}') FROM fenced)
               AS fenced_generations,
           (SELECT coalesce(array_agg(grant_id ORDER BY grant_id), '{}') FROM grants) AS grants
    FROM bumped b),
history AS (
    INSERT INTO event (node, kind, generation, actor, detail, at)
    SELECT s.name, 'node.fenced', s.generation, ?,
           jsonb_build_object('previous_generation', CAST(? AS bigint),
                              'reason', CAST(? AS text),
                              'revoked_leases', to_jsonb(s.leases),
                              'revoked_grants', to_jsonb(s.grants),
                              'fenced_generations', to_jsonb(s.fenced_generations))::text, ?
    FROM summary s)
SELECT generation, leases, lease_generations, grants FROM summary;
