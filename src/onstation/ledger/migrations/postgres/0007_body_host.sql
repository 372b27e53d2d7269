-- The host process of each body session (schema version 7).

-- A host (Claude Code, Codex) issues a new session id on /clear, /resume, a compaction or a
-- fork, and the same process goes on as the same body. Each admitted session records a
-- witness of the host process its hooks ran for (JSON: host, boot id, pid, start time, its
-- clock, executable); a session starting with source clear, resume, compact or fork in the
-- same host process as the live body's session continues that body (same lease, same
-- generation), recorded with the session it continues. A truly concurrent second process has
-- another witness and is refused as before.
CREATE TABLE body_host (
    session_id      TEXT PRIMARY KEY,
    node            TEXT NOT NULL REFERENCES agent_node(name),
    lease_id        BIGINT,
    host_witness    TEXT NOT NULL,
    continued_from  TEXT,
    source          TEXT,
    at              BIGINT NOT NULL
);
CREATE INDEX body_host_by_lease ON body_host(lease_id);
