-- A node's own rows, found without reading every node's (schema version 17).

-- Each of these questions named one node (or one lease, or one message) and had no index
-- to find it by, so it read the whole table, whose rows only accumulate: every session's
-- last fill reading (the team view asks it of every identity on every poll, a relief of its
-- body), every note and decision (each brief), every episode (each brief, capsule and
-- launch), every message for the replies to a node's open exchanges (each relief before its
-- fence), every session for the one bound at a launch (a launched successor's admission),
-- every host witness of every node (a continued session's admission), and every lease for
-- the LIVE ones past their expiry (the console's alert pass). Each index below leads to the
-- rows asked for, so the cost is theirs, not the ledger's whole past.
--
-- A node's open exchanges (APPROACH or CHECKPOINT messages without a reply) were found by
-- reading every such message the node was ever sent and, for each, every message for a
-- reply: a message now records when it was answered (answered_at, set in the transaction
-- that writes the reply; filled below for the replies already on record), and the open
-- exchanges are read through a partial index of the unanswered ones.
CREATE INDEX telemetry_by_node ON telemetry (node, reported_at);
CREATE INDEX note_by_node ON note (node, note_id);
CREATE INDEX work_episode_by_node ON work_episode (node, episode_id);
CREATE INDEX message_by_reply ON message (reply_to);
CREATE INDEX body_session_by_lease ON body_session (lease_id);
CREATE INDEX body_host_by_node ON body_host (node, at);
CREATE INDEX workspace_binding_by_node ON workspace_binding (node, bound_at);
CREATE INDEX body_lease_live_by_id ON body_lease (lease_id) WHERE state = 'LIVE';
ALTER TABLE message ADD COLUMN answered_at INTEGER;
UPDATE message SET answered_at = (
    SELECT min(r.created_at) FROM message r WHERE r.reply_to = message.message_id)
WHERE EXISTS (SELECT 1 FROM message r WHERE r.reply_to = message.message_id);
CREATE INDEX message_open_exchange ON message (recipient, message_id)
WHERE kind IN ('APPROACH', 'CHECKPOINT') AND answered_at IS NULL;
