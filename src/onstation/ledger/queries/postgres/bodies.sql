-- PostgreSQL's own statements for the bodies aggregate (queries/bodies.sql), with no
-- portable form: a data-modifying WITH.

-- name: pg_generation_base_offer
-- A generation's base offered by a session start (ledger/generation_bases.py offer_base):
-- recorded unless one is recorded (the first wins), with its generation.base event, in one
-- statement that returns nothing, so that it is sent and not waited for. Parameters:
-- generation, commit, source, time, node, the event's actor and its encoded detail.
WITH recorded AS (
    INSERT INTO generation_base (node, generation, commit_id, source, at)
    SELECT name, ?, ?, ?, ? FROM agent_node WHERE name = ?
    ON CONFLICT (node, generation) DO NOTHING
    RETURNING node, generation, at
)
INSERT INTO event (node, kind, generation, actor, detail, at)
SELECT node, 'generation.base', generation, ?, ?, at FROM recorded;
