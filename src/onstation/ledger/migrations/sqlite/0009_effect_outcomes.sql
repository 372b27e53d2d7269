-- What became of a dispatched effect's tool call (schema version 9).

-- A dispatched effect whose tool the host did not run (its permission step denied it, the
-- user declined it, a deny rule or another hook blocked it; or its destination, asked, shows
-- it unchanged) is NOT_EXECUTED, and may be intended again. SQLite cannot alter a CHECK
-- constraint: the table is rebuilt as `effect_new` and renamed. Renaming rewrites the
-- references other tables make to the renamed table, and dropping a parent with children
-- fails: so `tool_call`, the one table referring to `effect`, is rebuilt to refer to
-- `effect_new` first, and the rename then makes every reference name `effect` again.
CREATE TABLE effect_new (
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
                                                   'FAILED_BEFORE_DISPATCH', 'AMBIGUOUS', 'COMPENSATED',
                                                   'NOT_EXECUTED')),
    result         TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    resolved_by    TEXT,
    resolution     TEXT,
    repeat_of      TEXT REFERENCES effect_new(effect_id),
    repeat_reason  TEXT
);
INSERT INTO effect_new (effect_id, node, generation, fingerprint, operation, destination,
                        arguments, approval_slot, caller_ref, state, result, created_at,
                        updated_at, resolved_by, resolution, repeat_of, repeat_reason)
SELECT effect_id, node, generation, fingerprint, operation, destination, arguments,
       approval_slot, caller_ref, state, result, created_at, updated_at,
       resolved_by, resolution, repeat_of, repeat_reason
FROM effect;
CREATE TABLE tool_call_new (
    tool_use_id  TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL,
    effect_id    TEXT NOT NULL REFERENCES effect_new(effect_id),
    at           INTEGER NOT NULL
);
INSERT INTO tool_call_new (tool_use_id, session_id, effect_id, at)
SELECT tool_use_id, session_id, effect_id, at FROM tool_call;
DROP TABLE tool_call;
ALTER TABLE tool_call_new RENAME TO tool_call;
DROP TABLE effect;
ALTER TABLE effect_new RENAME TO effect;
CREATE INDEX effect_by_node ON effect(node, generation);
CREATE INDEX effect_by_identity ON effect(node, operation, destination);
CREATE INDEX effect_by_state ON effect(node, state);

-- The tool call that dispatched an effect, kept while it may be settled: which session and
-- call (the host's tool_use_id, when it gave one), the tool and a digest of its input (a
-- result without a tool_use_id pairs by session, tool and digest), where the transcript
-- stood when the call was dispatched (its rejection is looked for from there), and how the
-- destination can be asked (JSON; for a push: the repository, the remote and each ref as the
-- remote showed it before the push).
CREATE TABLE effect_call (
    effect_id          TEXT PRIMARY KEY REFERENCES effect(effect_id),
    node               TEXT NOT NULL,
    generation         INTEGER NOT NULL,
    session_id         TEXT NOT NULL,
    tool_use_id        TEXT,
    tool_name          TEXT NOT NULL,
    input_digest       TEXT NOT NULL,
    transcript_path    TEXT,
    transcript_offset  INTEGER,
    observe            TEXT,
    at                 INTEGER NOT NULL
);
CREATE INDEX effect_call_by_session ON effect_call(session_id, tool_name, input_digest);
CREATE INDEX effect_call_by_node ON effect_call(node, generation);
