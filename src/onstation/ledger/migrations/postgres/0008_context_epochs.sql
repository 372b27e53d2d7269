-- Context windows and context epochs (schema version 8).

-- The context window the host declared for a body (Claude Code status line
-- `context_window.context_window_size`, Codex `token_count` `info.model_context_window`), in
-- tokens; NULL until the host declares one. Every later reading of the body (hook path, fast
-- path, status line) is taken against it, so a 1M session reads one percent everywhere.
ALTER TABLE body_session ADD COLUMN context_window BIGINT;

-- A compaction starts a new context epoch of the body: the reading resets and the tier marks
-- re-arm. 0 until the first compaction onstation sees.
ALTER TABLE body_session ADD COLUMN context_epoch BIGINT NOT NULL DEFAULT 0;

-- The epoch the latest reading belongs to.
ALTER TABLE telemetry ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;

-- Tiers are marked once per body and context epoch (was: once per body).
ALTER TABLE tier_mark ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tier_mark DROP CONSTRAINT tier_mark_pkey;
ALTER TABLE tier_mark ADD PRIMARY KEY (session_id, epoch, tier);

-- What onstation told the history about a body's readings, once each: a rejected reading
-- (kind 'rejected', detail naming the figure) per epoch, and a configured tier that lies past
-- the host's compaction point (kind 'past_compaction', epoch 0: once per body).
CREATE TABLE hull_notice (
    session_id   TEXT NOT NULL,
    epoch        BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    detail       TEXT NOT NULL,
    at           BIGINT NOT NULL,
    PRIMARY KEY (session_id, epoch, kind, detail)
);
