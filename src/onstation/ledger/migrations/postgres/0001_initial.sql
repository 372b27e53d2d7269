-- onstation ledger, PostgreSQL schema version 1.
-- Times are BIGINT microseconds since the Unix epoch, UTC, from the ledger's clock.

CREATE TABLE gate (
    id  INTEGER PRIMARY KEY CHECK (id = 1)
);
INSERT INTO gate (id) VALUES (1);

CREATE TABLE agent_node (
    name            TEXT PRIMARY KEY,
    role            TEXT,
    spawner         TEXT,
    generation      BIGINT NOT NULL CHECK (generation >= 1),
    state           TEXT NOT NULL DEFAULT 'ACTIVE' CHECK (state IN ('ACTIVE', 'RETIRED')),
    created_at      BIGINT NOT NULL,
    breaker_open    INTEGER NOT NULL DEFAULT 0 CHECK (breaker_open IN (0, 1)),
    breaker_reason  TEXT
);

CREATE TABLE actor (
    name        TEXT PRIMARY KEY,
    node        TEXT REFERENCES agent_node(name),
    created_at  BIGINT NOT NULL
);

CREATE TABLE work_episode (
    episode_id  BIGSERIAL PRIMARY KEY,
    node        TEXT NOT NULL REFERENCES agent_node(name),
    objective   TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('OPEN', 'SETTLED')),
    opened_at   BIGINT NOT NULL,
    closed_at   BIGINT
);
CREATE UNIQUE INDEX work_episode_one_open ON work_episode(node) WHERE state = 'OPEN';

CREATE TABLE body_lease (
    lease_id     BIGSERIAL PRIMARY KEY,
    node         TEXT NOT NULL REFERENCES agent_node(name),
    generation   BIGINT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('LIVE', 'RELEASED', 'EXPIRED', 'FENCED')),
    holder       TEXT,
    acquired_at  BIGINT NOT NULL,
    renewed_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    ended_at     BIGINT,
    end_reason   TEXT,
    episode_id   BIGINT REFERENCES work_episode(episode_id),
    UNIQUE (node, generation)
);
CREATE UNIQUE INDEX body_lease_one_live ON body_lease(node) WHERE state = 'LIVE';

-- An AgentRun is one execution attempt: exactly the run of one admitted body. It is read
-- from the lease that admitted it, so admission and fencing write one row, not two.
CREATE VIEW agent_run AS
SELECT lease_id AS run_id, node, generation, lease_id, episode_id, acquired_at AS started_at,
       ended_at, CASE WHEN state = 'LIVE' THEN NULL ELSE lower(state) END AS outcome
FROM body_lease;

CREATE TABLE capability_grant (
    grant_id    BIGSERIAL PRIMARY KEY,
    node        TEXT NOT NULL REFERENCES agent_node(name),
    generation  BIGINT NOT NULL,
    capability  TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('LIVE', 'REVOKED')),
    issued_at   BIGINT NOT NULL,
    revoked_at  BIGINT,
    UNIQUE (node, generation, capability)
);

CREATE TABLE denial (
    denial_id             BIGSERIAL PRIMARY KEY,
    node                  TEXT NOT NULL REFERENCES agent_node(name),
    presented_generation  BIGINT NOT NULL,
    current_generation    BIGINT NOT NULL,
    action                TEXT NOT NULL,
    reason                TEXT NOT NULL,
    at                    BIGINT NOT NULL
);
CREATE INDEX denial_by_node ON denial(node, denial_id);

CREATE TABLE effect (
    effect_id      TEXT PRIMARY KEY,
    node           TEXT NOT NULL REFERENCES agent_node(name),
    generation     BIGINT NOT NULL,
    fingerprint    TEXT NOT NULL UNIQUE,
    operation      TEXT NOT NULL,
    destination    TEXT NOT NULL,
    arguments      TEXT NOT NULL,
    approval_slot  TEXT,
    caller_ref     TEXT,
    state          TEXT NOT NULL CHECK (state IN ('INTENDED', 'DISPATCHED', 'OBSERVED', 'COMMITTED',
                                                   'FAILED_BEFORE_DISPATCH', 'AMBIGUOUS', 'COMPENSATED')),
    result         TEXT,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    resolved_by    TEXT,
    resolution     TEXT
);
CREATE INDEX effect_by_node ON effect(node, generation);

CREATE TABLE respawn (
    respawn_id  BIGSERIAL PRIMARY KEY,
    node        TEXT NOT NULL REFERENCES agent_node(name),
    at          BIGINT NOT NULL,
    by          TEXT NOT NULL
);
CREATE INDEX respawn_by_node ON respawn(node, at);

CREATE TABLE halt (
    halt_id    BIGSERIAL PRIMARY KEY,
    node       TEXT,
    by         TEXT NOT NULL,
    why        TEXT NOT NULL,
    at         BIGINT NOT NULL,
    lifted_at  BIGINT,
    lifted_by  TEXT
);

CREATE TABLE event (
    seq         BIGSERIAL PRIMARY KEY,
    node        TEXT,
    kind        TEXT NOT NULL,
    generation  BIGINT,
    actor       TEXT NOT NULL,
    detail      TEXT NOT NULL,
    at          BIGINT NOT NULL
);
CREATE INDEX event_by_node ON event(node, seq);

CREATE FUNCTION onstation_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$;
CREATE TRIGGER event_append_only BEFORE UPDATE OR DELETE ON event
    FOR EACH ROW EXECUTE FUNCTION onstation_append_only();
CREATE TRIGGER denial_append_only BEFORE UPDATE OR DELETE ON denial
    FOR EACH ROW EXECUTE FUNCTION onstation_append_only();
