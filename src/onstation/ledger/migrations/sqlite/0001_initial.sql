-- onstation ledger, SQLite schema version 1.
-- Times are INTEGER microseconds since the Unix epoch, UTC, from the ledger's clock.
-- Ids are rowids without AUTOINCREMENT: rows are never deleted, so each new id is the
-- largest so far plus one, and no sqlite_sequence row is rewritten on every insert.

CREATE TABLE agent_node (
    name            TEXT PRIMARY KEY,
    role            TEXT,
    spawner         TEXT,
    generation      INTEGER NOT NULL CHECK (generation >= 1),
    state           TEXT NOT NULL DEFAULT 'ACTIVE' CHECK (state IN ('ACTIVE', 'RETIRED')),
    created_at      INTEGER NOT NULL,
    breaker_open    INTEGER NOT NULL DEFAULT 0 CHECK (breaker_open IN (0, 1)),
    breaker_reason  TEXT
);

CREATE TABLE actor (
    name        TEXT PRIMARY KEY,
    node        TEXT REFERENCES agent_node(name),
    created_at  INTEGER NOT NULL
);

CREATE TABLE work_episode (
    episode_id  INTEGER PRIMARY KEY,
    node        TEXT NOT NULL REFERENCES agent_node(name),
    objective   TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('OPEN', 'SETTLED')),
    opened_at   INTEGER NOT NULL,
    closed_at   INTEGER
);
CREATE UNIQUE INDEX work_episode_one_open ON work_episode(node) WHERE state = 'OPEN';

CREATE TABLE body_lease (
    lease_id     INTEGER PRIMARY KEY,
    node         TEXT NOT NULL REFERENCES agent_node(name),
    generation   INTEGER NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('LIVE', 'RELEASED', 'EXPIRED', 'FENCED')),
    holder       TEXT,
    acquired_at  INTEGER NOT NULL,
    renewed_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    ended_at     INTEGER,
    end_reason   TEXT,
    episode_id   INTEGER REFERENCES work_episode(episode_id),
    UNIQUE (node, generation)
);
-- Backstop for the rule the code enforces: never two live bodies for one identity.
CREATE UNIQUE INDEX body_lease_one_live ON body_lease(node) WHERE state = 'LIVE';

-- An AgentRun is one execution attempt: exactly the run of one admitted body. It is read
-- from the lease that admitted it, so admission and fencing write one row, not two.
CREATE VIEW agent_run AS
SELECT lease_id AS run_id, node, generation, lease_id, episode_id, acquired_at AS started_at,
       ended_at, CASE WHEN state = 'LIVE' THEN NULL ELSE lower(state) END AS outcome
FROM body_lease;

CREATE TABLE capability_grant (
    grant_id    INTEGER PRIMARY KEY,
    node        TEXT NOT NULL REFERENCES agent_node(name),
    generation  INTEGER NOT NULL,
    capability  TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('LIVE', 'REVOKED')),
    issued_at   INTEGER NOT NULL,
    revoked_at  INTEGER,
    UNIQUE (node, generation, capability)
);

CREATE TABLE denial (
    denial_id             INTEGER PRIMARY KEY,
    node                  TEXT NOT NULL REFERENCES agent_node(name),
    presented_generation  INTEGER NOT NULL,
    current_generation    INTEGER NOT NULL,
    action                TEXT NOT NULL,
    reason                TEXT NOT NULL,
    at                    INTEGER NOT NULL
);
CREATE INDEX denial_by_node ON denial(node, denial_id);

CREATE TABLE effect (
    effect_id      TEXT PRIMARY KEY,
    node           TEXT NOT NULL REFERENCES agent_node(name),
    generation     INTEGER NOT NULL,
    fingerprint    TEXT NOT NULL UNIQUE,
    operation      TEXT NOT NULL,
    destination    TEXT NOT NULL,
    arguments      TEXT NOT NULL,
    approval_slot  TEXT,
    caller_ref     TEXT,
    state          TEXT NOT NULL CHECK (state IN ('INTENDED', 'DISPATCHED', 'OBSERVED', 'COMMITTED',
                                                   'FAILED_BEFORE_DISPATCH', 'AMBIGUOUS', 'COMPENSATED')),
    result         TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    resolved_by    TEXT,
    resolution     TEXT
);
CREATE INDEX effect_by_node ON effect(node, generation);

CREATE TABLE respawn (
    respawn_id  INTEGER PRIMARY KEY,
    node        TEXT NOT NULL REFERENCES agent_node(name),
    at          INTEGER NOT NULL,
    by          TEXT NOT NULL
);
CREATE INDEX respawn_by_node ON respawn(node, at);

CREATE TABLE halt (
    halt_id    INTEGER PRIMARY KEY,
    node       TEXT,
    by         TEXT NOT NULL,
    why        TEXT NOT NULL,
    at         INTEGER NOT NULL,
    lifted_at  INTEGER,
    lifted_by  TEXT
);

CREATE TABLE event (
    seq         INTEGER PRIMARY KEY,
    node        TEXT,
    kind        TEXT NOT NULL,
    generation  INTEGER,
    actor       TEXT NOT NULL,
    detail      TEXT NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX event_by_node ON event(node, seq);

-- The history and the denial receipts are append-only.
CREATE TRIGGER event_no_update BEFORE UPDATE ON event
BEGIN SELECT RAISE(ABORT, 'event history is append-only'); END;
CREATE TRIGGER event_no_delete BEFORE DELETE ON event
BEGIN SELECT RAISE(ABORT, 'event history is append-only'); END;
CREATE TRIGGER denial_no_update BEFORE UPDATE ON denial
BEGIN SELECT RAISE(ABORT, 'denial receipts are append-only'); END;
CREATE TRIGGER denial_no_delete BEFORE DELETE ON denial
BEGIN SELECT RAISE(ABORT, 'denial receipts are append-only'); END;
