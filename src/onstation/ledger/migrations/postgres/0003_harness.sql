-- Harness bodies, telemetry, mailboxes and documents (schema version 3, PostgreSQL).

-- Which identity a workspace (a directory tree) works for.
CREATE TABLE workspace_binding (
    path        TEXT PRIMARY KEY,
    node        TEXT NOT NULL REFERENCES agent_node(name),
    harness     TEXT NOT NULL,
    bound_at    BIGINT NOT NULL
);

-- A harness session (Claude Code session id, Codex thread) is a body: it is bound to the
-- identity and generation it was admitted for, or recorded as refused.
CREATE TABLE body_session (
    session_id           TEXT PRIMARY KEY,
    harness              TEXT NOT NULL,
    node                 TEXT NOT NULL REFERENCES agent_node(name),
    generation           BIGINT NOT NULL,
    lease_id             BIGINT REFERENCES body_lease(lease_id),
    state                TEXT NOT NULL CHECK (state IN ('ADMITTED', 'REFUSED')),
    workspace            TEXT,
    bound_at             BIGINT NOT NULL,
    relief_requested_at  BIGINT,
    stop_blocked_at      BIGINT,
    telemetry_cursor     TEXT,
    transcript_path      TEXT
);
CREATE INDEX body_session_by_node ON body_session(node, generation);

-- Effect-capable tool calls between PreToolUse and PostToolUse.
CREATE TABLE tool_call (
    tool_use_id  TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL,
    effect_id    TEXT NOT NULL REFERENCES effect(effect_id),
    at           BIGINT NOT NULL
);

-- The latest fill reading of each body, and the tiers each body has reported (once each).
CREATE TABLE telemetry (
    session_id   TEXT PRIMARY KEY,
    node         TEXT NOT NULL REFERENCES agent_node(name),
    generation   BIGINT NOT NULL,
    percent      REAL NOT NULL,
    used_tokens  BIGINT,
    window_tokens BIGINT NOT NULL,
    source       TEXT NOT NULL,
    model        TEXT,
    tier         TEXT NOT NULL,
    reported_at  BIGINT NOT NULL
);
CREATE TABLE tier_mark (
    session_id   TEXT NOT NULL,
    tier         TEXT NOT NULL,
    generation   BIGINT NOT NULL,
    percent      REAL NOT NULL,
    at           BIGINT NOT NULL,
    PRIMARY KEY (session_id, tier)
);

-- Messages between actors and to bodies (relief requests, shutdown, respawn, exchanges).
CREATE TABLE message (
    message_id    BIGSERIAL PRIMARY KEY,
    sender        TEXT NOT NULL,
    recipient     TEXT NOT NULL,
    kind          TEXT NOT NULL,
    body          TEXT NOT NULL,
    reply_to      BIGINT REFERENCES message(message_id),
    created_at    BIGINT NOT NULL,
    delivered_at  BIGINT,
    delivered_to  TEXT
);
CREATE INDEX message_by_recipient ON message(recipient, delivered_at);

-- Decisions and notes an agent records for its successor.
CREATE TABLE note (
    note_id     BIGSERIAL PRIMARY KEY,
    node        TEXT NOT NULL REFERENCES agent_node(name),
    generation  BIGINT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('decision', 'note')),
    text        TEXT NOT NULL,
    rationale   TEXT,
    at          BIGINT NOT NULL
);

-- Turnover briefs and continuation manifests: the exact JSON given to a successor.
CREATE TABLE document (
    document_id  BIGSERIAL PRIMARY KEY,
    node         TEXT NOT NULL REFERENCES agent_node(name),
    generation   BIGINT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('brief', 'manifest', 'report', 'prompt')),
    path         TEXT NOT NULL,
    content      TEXT NOT NULL,
    digest       TEXT NOT NULL,
    at           BIGINT NOT NULL
);
CREATE INDEX document_by_node ON document(node, kind, document_id);
