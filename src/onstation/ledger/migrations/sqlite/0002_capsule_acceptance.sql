-- Signature-receipt replay protection: the newest capsule accepted per identity.
CREATE TABLE accepted_capsule (
    node         TEXT NOT NULL REFERENCES agent_node(name),
    generation   INTEGER NOT NULL,
    sequence     INTEGER NOT NULL,
    digest       TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    accepted_at  INTEGER NOT NULL,
    PRIMARY KEY (node, generation, sequence)
);
