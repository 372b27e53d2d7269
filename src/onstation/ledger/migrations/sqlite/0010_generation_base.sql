-- The commit each generation started from (schema version 10).

-- A body's work is what it changed since it started: its generation's base. Recorded once per
-- generation, the first time it is known: when a relief launches the successor (the head it
-- challenged it with) or when the generation's first session starts in a git workspace (the
-- head then). The capsule's diff is taken against it, so the successor gets this body's work,
-- not only what is uncommitted.
CREATE TABLE generation_base (
    node        TEXT NOT NULL REFERENCES agent_node(name),
    generation  INTEGER NOT NULL,
    commit_id   TEXT NOT NULL,
    source      TEXT NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (node, generation)
);
