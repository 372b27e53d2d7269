-- Capsules and plans, stored by their digest (schema version 11).

-- A relief seals a capsule and decides a plan; its record named only their digests. Both are
-- kept here, content-addressed, so that `onstation capsule show DIGEST` and
-- `onstation plan show DIGEST` give back exactly what the relief used. A digest is stored
-- once: the same object sealed again is the same row.
CREATE TABLE stored_object (
    digest  TEXT PRIMARY KEY,
    kind    TEXT NOT NULL CHECK (kind IN ('capsule', 'plan')),
    node    TEXT NOT NULL REFERENCES agent_node(name),
    body    TEXT NOT NULL,
    at      BIGINT NOT NULL
);
CREATE INDEX stored_object_by_node ON stored_object(node, kind, at);
