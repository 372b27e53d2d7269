-- The outcome of every tool call of an admitted body (schema version 12).

-- The hooks journal each call's end as the host reports it: PostToolUse (succeeded, or failed
-- when the response says so), PostToolUseFailure (failed or interrupted) and PermissionDenied
-- (denied). A relief turns a generation's rows into the capsule's tool pairs and test runs
-- (issue 13). The call is kept as a short, redacted summary (at most 500 characters), never
-- its whole input or output; detail is at most 400 characters. Rows are never changed.
CREATE TABLE tool_call_outcome (
    id           INTEGER PRIMARY KEY,
    node         TEXT NOT NULL REFERENCES agent_node(name),
    generation   INTEGER NOT NULL,
    session_id   TEXT NOT NULL,
    tool_use_id  TEXT,
    tool         TEXT NOT NULL,
    call_summary TEXT NOT NULL,
    outcome      TEXT NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'denied', 'interrupted')),
    exit_code    INTEGER,
    detail       TEXT,
    at           INTEGER NOT NULL
);
CREATE INDEX tool_call_outcome_by_generation ON tool_call_outcome(node, generation, id);
