-- Records bound to a generation (schema version 6).

-- A message may concern one body: `generation` is the recipient's generation it is meant for
-- (NULL: whoever holds the identity). A message for a fenced generation is never delivered to
-- a later one. `sender_generation` is the generation a node wrote it under.
ALTER TABLE message ADD COLUMN generation INTEGER;
ALTER TABLE message ADD COLUMN sender_generation INTEGER;

-- A brief written by a body after its fence is kept, but only as late, untrusted evidence:
-- never taken as the hand-over of a relief.
ALTER TABLE document ADD COLUMN late INTEGER NOT NULL DEFAULT 0;

-- Which cap a counted respawn falls under: a coordinator's self-respawn (the coordinator
-- procedure's cap) or a relief of a body by its lead (births per window).
ALTER TABLE respawn ADD COLUMN kind TEXT NOT NULL DEFAULT 'relief';

-- What a body runs under, recorded when it is admitted or launched (JSON: harness, and for a
-- launched body its model, command template and execution class): a relief launches the
-- successor with the same, never with a stand-in it was not given.
ALTER TABLE body_session ADD COLUMN launcher TEXT;
