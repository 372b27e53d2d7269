-- A fence and an admission as one statement each (schema version 18).

-- Each must lock first and then read, in two statements: at READ COMMITTED a statement reads
-- one snapshot, taken before any lock wait, so a single statement that waited for a
-- concurrent fence, admission or halt would keep reading what was there before it. Sent from
-- the client, that took a transaction of four statements (BEGIN, the locks, the work,
-- COMMIT): on a machine where a round trip is cheap, the client's own work for them made a
-- fence and an admission slower than hand-written SQL doing the same writes. Here both
-- statements run inside the server, each with its own snapshot as before, and the client
-- sends one statement, which commits on its own or joins the caller's transaction.
--
-- The search_path is the one the migration ran with (the ledger's schema): a caller's
-- search_path cannot point the functions at other tables. Parameters are prefixed p_ and
-- result columns out_, so that neither is mistaken for a table's column.

-- The fence: the node's row locked, then the compare-and-swap of its generation and, only
-- when it matched, its LIVE leases ended as FENCED, its LIVE grants of the fenced generation
-- and older revoked, and the node.fenced event. One row (none when the CAS lost): the new
-- generation, the fenced lease ids and their generations (in lease id order), the revoked
-- grant ids.
CREATE FUNCTION onstation_fence(p_node TEXT, p_expect BIGINT, p_now BIGINT, p_reason TEXT,
                                p_actor TEXT)
RETURNS TABLE (out_generation BIGINT, out_leases BIGINT[], out_lease_generations BIGINT[],
               out_grants BIGINT[])
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fence$
BEGIN
    PERFORM 1 FROM agent_node WHERE name = p_node FOR UPDATE;
    RETURN QUERY
    WITH bumped AS (
        UPDATE agent_node SET generation = generation + 1
        WHERE name = p_node AND generation = p_expect
        RETURNING name, generation),
    fenced AS (
        UPDATE body_lease SET state = 'FENCED', ended_at = p_now, end_reason = p_reason
        WHERE node IN (SELECT name FROM bumped) AND state = 'LIVE'
        RETURNING lease_id, generation),
    grants AS (
        UPDATE capability_grant SET state = 'REVOKED', revoked_at = p_now
        WHERE node IN (SELECT name FROM bumped) AND state = 'LIVE' AND generation <= p_expect
        RETURNING grant_id),
    summary AS (
        SELECT b.name, b.generation,
               (SELECT coalesce(array_agg(f.lease_id ORDER BY f.lease_id), '{}')
                  FROM fenced f) AS leases,
               (SELECT coalesce(array_agg(f.generation ORDER BY f.lease_id), '{}')
                  FROM fenced f) AS lease_generations,
               (SELECT coalesce(array_agg(f.generation ORDER BY f.generation), '{}')
                  FROM fenced f) AS fenced_generations,
               (SELECT coalesce(array_agg(g.grant_id ORDER BY g.grant_id), '{}')
                  FROM grants g) AS grants
        FROM bumped b),
    history AS (
        INSERT INTO event (node, kind, generation, actor, detail, at)
        SELECT s.name, 'node.fenced', s.generation, p_actor,
               jsonb_build_object('previous_generation', p_expect,
                                  'reason', p_reason,
                                  'revoked_leases', to_jsonb(s.leases),
                                  'revoked_grants', to_jsonb(s.grants),
                                  'fenced_generations', to_jsonb(s.fenced_generations))::text,
               p_now
        FROM summary s)
    SELECT s.generation, s.leases, s.lease_generations, s.grants FROM summary s;
END
$fence$;

-- The admission: the node's row locked and the halt gate shared, then the admission read
-- (generation, state, the generation's lease id, state, expiry and holder, the oldest halt
-- in force, the open episode) and, only when it allows admission (node ACTIVE, no halt, no
-- lease for its generation yet, the generation the expected one when one is given), the LIVE
-- lease and its lease.acquired event (its detail p_detail plus the new lease_id). One row:
-- the read's eight columns and the new lease id (NULL when nothing was admitted); none when
-- the node does not exist.
CREATE FUNCTION onstation_admit(p_node TEXT, p_holder TEXT, p_now BIGINT, p_expires BIGINT,
                                p_expect BIGINT, p_actor TEXT, p_detail TEXT)
RETURNS TABLE (out_generation BIGINT, out_state TEXT, out_lease_id BIGINT,
               out_lease_state TEXT, out_expires_at BIGINT, out_holder TEXT,
               out_halt_id BIGINT, out_episode_id BIGINT, out_admitted BIGINT)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $admit$
BEGIN
    PERFORM 1 FROM agent_node n CROSS JOIN gate g WHERE n.name = p_node
    FOR UPDATE OF n FOR SHARE OF g;
    RETURN QUERY
    WITH r AS (
        SELECT n.name, n.generation, n.state, l.lease_id, l.state AS lease_state,
               l.expires_at, l.holder,
               (SELECT h.halt_id FROM halt h WHERE h.lifted_at IS NULL
                 AND (h.node IS NULL OR h.node = n.name) ORDER BY h.halt_id LIMIT 1) AS halt_id,
               (SELECT e.episode_id FROM work_episode e WHERE e.node = n.name
                 AND e.state = 'OPEN') AS episode_id
        -- The lease through a LATERAL subquery kept apart (OFFSET 0): found by its
        -- (node, generation) key, not by reading every lease of the node.
        FROM agent_node n LEFT JOIN LATERAL (
            SELECT l.lease_id, l.state, l.expires_at, l.holder FROM body_lease l
            WHERE l.node = n.name AND l.generation = n.generation OFFSET 0) l ON true
        WHERE n.name = p_node),
    lease AS (
        INSERT INTO body_lease (node, generation, state, holder, acquired_at,
                                renewed_at, expires_at, episode_id)
        SELECT r.name, r.generation, 'LIVE', p_holder, p_now, p_now, p_expires, r.episode_id
        FROM r
        WHERE r.state = 'ACTIVE' AND r.halt_id IS NULL AND r.lease_id IS NULL
          AND (p_expect IS NULL OR r.generation = p_expect)
        RETURNING lease_id, node, generation),
    history AS (
        INSERT INTO event (node, kind, generation, actor, detail, at)
        SELECT lease.node, 'lease.acquired', lease.generation, p_actor,
               (CAST(p_detail AS jsonb) || jsonb_build_object('lease_id', lease.lease_id))::text,
               p_now
        FROM lease)
    SELECT r.generation, r.state, r.lease_id, r.lease_state, r.expires_at, r.holder,
           r.halt_id, r.episode_id, (SELECT lease.lease_id FROM lease)
    FROM r;
END
$admit$;
