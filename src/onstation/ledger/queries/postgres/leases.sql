-- onstation ledger, PostgreSQL's own versions of the lease records' named queries
-- (onstation/ledger/leases.py; the portable ones are in queries/leases.sql). At READ COMMITTED
-- each statement takes a fresh snapshot, so the locks are taken in a statement of their own
-- before the statement that must see what was committed while it waited.

-- name: lease_admission_lock
-- Lock the node and take the halt gate in share mode before the admission read, so that the
-- read's snapshot (taken after the locks) sees a halt or a lease committed while we waited.
SELECT n.generation FROM agent_node n CROSS JOIN gate g WHERE n.name = ?
FOR UPDATE OF n FOR SHARE OF g;

-- name: pg_lease_insert_with_event
-- Admit a body and record its lease.acquired event in one round trip: the LIVE lease (as
-- lease_insert), then the event, its detail the given JSON plus the new lease_id; returns
-- lease_id.
WITH lease AS (
    INSERT INTO body_lease (node, generation, state, holder, acquired_at,
                            renewed_at, expires_at, episode_id)
    VALUES (?, ?, 'LIVE', ?, ?, ?, ?, ?)
    RETURNING lease_id),
history AS (
    INSERT INTO event (node, kind, generation, actor, detail, at)
    SELECT ?, 'lease.acquired', ?, ?,
           (CAST(? AS jsonb) || jsonb_build_object('lease_id', lease_id))::text, ?
    FROM lease)
SELECT lease_id FROM lease;

-- name: fence_node_lock
-- Lock the node before pg_fence_cas_revoke, so that its snapshot sees every lease admitted before
-- us (a data-modifying CTE reads one snapshot, taken before any lock wait).
SELECT generation FROM agent_node WHERE name = ? FOR UPDATE;

-- name: pg_fence_cas_revoke
-- The whole fence in one round trip: the compare-and-swap of the generation (which takes the
-- node's row lock), then, only when it matched, the node's LIVE leases ended as FENCED and its
-- LIVE grants of the fenced generation and older revoked. Returns one row (none when the CAS
-- lost): the new generation, the fenced lease ids, their generations (in lease id order) and
-- the revoked grant ids, as arrays.
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
    RETURNING grant_id)
SELECT b.generation,
       (SELECT coalesce(array_agg(lease_id ORDER BY lease_id), '{}') FROM fenced),
       (SELECT coalesce(array_agg(generation ORDER BY lease_id), '{}') FROM fenced),
       (SELECT coalesce(array_agg(grant_id ORDER BY grant_id), '{}') FROM grants)
FROM bumped b;
