-- The live grants of a node, found without reading its history (schema version 13).

-- A fence revokes the LIVE grants of the fenced generation and older, and every PreToolUse
-- of a body that holds grants reads its generation's live ones. Both used the
-- (node, generation, capability) key, which leads to every grant the node ever received: the
-- cost grew with the node's history. The live grants are few (one generation's), so a
-- partial index over them keeps both costs flat.
CREATE INDEX capability_grant_live ON capability_grant (node, generation) WHERE state = 'LIVE';
