-- Signature-receipt replay protection: the newest capsule accepted per identity.
CREATE TABLE accepted_capsule (
    node         TEXT NOT NULL REFERENCES agent_node(name),
    generation   BIGINT NOT NULL,
    sequence     BIGINT NOT NULL,
    digest       TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    accepted_at  BIGINT NOT NULL,
    PRIMARY KEY (node, generation, sequence)
);
