-- Relief records (schema version 4, PostgreSQL): tasks, successor births and their challenges,
-- capacity reservations, and the reliefs themselves.

CREATE TABLE task (
    task_id     BIGSERIAL PRIMARY KEY,
    title       TEXT NOT NULL,
    owner       TEXT,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'in_progress', 'blocked', 'completed')),
    notes       TEXT NOT NULL DEFAULT '[]',
    brief_path  TEXT,
    parent_id   BIGINT REFERENCES task(task_id),
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX task_by_owner ON task(owner, status);

-- One successor birth per generation: provisional until its challenge echo and its
-- process and heartbeat witnesses agree; effect rights only once RUNNING.
CREATE TABLE birth (
    node              TEXT NOT NULL REFERENCES agent_node(name),
    generation        BIGINT NOT NULL,
    lease_id          BIGINT REFERENCES body_lease(lease_id),
    state             TEXT NOT NULL CHECK (state IN ('PROVISIONAL', 'RUNNING', 'BIRTH_FAILED')),
    challenge         TEXT NOT NULL,
    challenge_digest  TEXT NOT NULL,
    launch_witness    TEXT,
    answer_witness    TEXT,
    launched_at       BIGINT NOT NULL,
    answered_at       BIGINT,
    decided_at        BIGINT,
    reason            TEXT,
    PRIMARY KEY (node, generation)
);

CREATE TABLE reservation (
    reservation_id   TEXT PRIMARY KEY,
    node             TEXT NOT NULL REFERENCES agent_node(name),
    generation       BIGINT NOT NULL,
    execution_class  TEXT NOT NULL,
    evidence_digest  TEXT,
    state            TEXT NOT NULL CHECK (state IN ('RESERVED', 'SETTLED', 'RELEASED')),
    created_at       BIGINT NOT NULL,
    settled_at       BIGINT
);

CREATE TABLE relief (
    relief_id        BIGSERIAL PRIMARY KEY,
    node             TEXT NOT NULL REFERENCES agent_node(name),
    from_generation  BIGINT NOT NULL,
    to_generation    BIGINT,
    state            TEXT NOT NULL,
    verdict          TEXT,
    cause            TEXT NOT NULL,
    started_at       BIGINT NOT NULL,
    finished_at      BIGINT,
    report_path      TEXT,
    detail           TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX relief_by_node ON relief(node, relief_id);
-- At most one relief in progress per identity: two supervisors cannot both start one.
CREATE UNIQUE INDEX relief_one_open ON relief(node) WHERE finished_at IS NULL;
