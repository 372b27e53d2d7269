-- What became of a dispatched effect's tool call (schema version 9).

-- A dispatched effect whose tool the host did not run (its permission step denied it, the
-- user declined it, a deny rule or another hook blocked it; or its destination, asked, shows
-- it unchanged) is NOT_EXECUTED, and may be intended again.
ALTER TABLE effect DROP CONSTRAINT effect_state_check;
ALTER TABLE effect ADD CONSTRAINT effect_state_check
    CHECK (state IN ('INTENDED', 'DISPATCHED', 'OBSERVED', 'COMMITTED', 'FAILED_BEFORE_DISPATCH',
                     'AMBIGUOUS', 'COMPENSATED', 'NOT_EXECUTED'));
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
    generation         BIGINT NOT NULL,
    session_id         TEXT NOT NULL,
    tool_use_id        TEXT,
    tool_name          TEXT NOT NULL,
    input_digest       TEXT NOT NULL,
    transcript_path    TEXT,
    transcript_offset  BIGINT,
    observe            TEXT,
    at                 BIGINT NOT NULL
);
CREATE INDEX effect_call_by_session ON effect_call(session_id, tool_name, input_digest);
CREATE INDEX effect_call_by_node ON effect_call(node, generation);
