-- Relief records (schema version 4): tasks, successor births and their challenges,
-- capacity reservations, and the reliefs themselves.

CREATE TABLE task (
    task_id     INTEGER PRIMARY KEY,
    title       TEXT NOT NULL,
    owner       TEXT,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'in_progress', 'blocked', 'completed')),
    notes       TEXT NOT NULL DEFAULT '[]',
    brief_path  TEXT,
    parent_id   INTEGER REFERENCES task(task_id),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX task_by_owner ON task(owner, status);

-- One successor birth per generation: provisional until its challenge echo and its
-- process and heartbeat witnesses agree; effect rights only once RUNNING.
CREATE TABLE birth (
    node              TEXT NOT NULL REFERENCES agent_node(name),
    generation        INTEGER NOT NULL,
    lease_id          INTEGER REFERENCES body_lease(lease_id),
    state             TEXT NOT NULL CHECK (state IN ('PROVISIONAL', 'RUNNING', 'BIRTH_FAILED')),
    challenge         TEXT NOT NULL,
    challenge_digest  TEXT NOT NULL,
    launch_witness    TEXT,
    answer_witness    TEXT,
    launched_at       INTEGER NOT NULL,
    answered_at       INTEGER,
    decided_at        INTEGER,
    reason            TEXT,
    PRIMARY KEY (node, generation)
);

CREATE TABLE reservation (
    reservation_id   TEXT PRIMARY KEY,
    node             TEXT NOT NULL REFERENCES agent_node(name),
    generation       INTEGER NOT NULL,
    execution_class  TEXT NOT NULL,
    evidence_digest  TEXT,
    state            TEXT NOT NULL CHECK (state IN ('RESERVED', 'SETTLED', 'RELEASED')),
    created_at       INTEGER NOT NULL,
    settled_at       INTEGER
);

CREATE TABLE relief (
    relief_id        INTEGER PRIMARY KEY,
    node             TEXT NOT NULL REFERENCES agent_node(name),
    from_generation  INTEGER NOT NULL,
    to_generation    INTEGER,
    state            TEXT NOT NULL,
    verdict          TEXT,
    cause            TEXT NOT NULL,
    started_at       INTEGER NOT NULL,
    finished_at      INTEGER,
    report_path      TEXT,
    detail           TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX relief_by_node ON relief(node, relief_id);
-- At most one relief in progress per identity: two supervisors cannot both start one.
CREATE UNIQUE INDEX relief_one_open ON relief(node) WHERE finished_at IS NULL;
