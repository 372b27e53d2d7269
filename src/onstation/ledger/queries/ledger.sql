-- onstation ledger, named queries of the combined ledger (onstation/ledger/ledger.py):
-- capsule acceptance and the event history. The same SQL on every backend (see
-- onstation/ledger/named_queries.py). Parameters are ? in every dialect. Times are integer
-- microseconds since the epoch, UTC.

-- name: capsule_newest_of_node
-- The high-water mark of a node's accepted capsules: generation, sequence and digest.
SELECT generation, sequence, digest FROM accepted_capsule WHERE node = ?
ORDER BY generation DESC, sequence DESC LIMIT 1;

-- name: capsule_insert
-- Record an accepted capsule (node, generation, sequence, digest, key_id, accepted_at).
INSERT INTO accepted_capsule (node, generation, sequence, digest, key_id, accepted_at)
VALUES (?, ?, ?, ?, ?, ?);

-- name: events_after
-- Every event with a sequence number above one, oldest first.
SELECT seq, node, kind, generation, actor, detail, at FROM event WHERE seq > ? ORDER BY seq;

-- name: events_after_limited
-- At most a number of events with a sequence number above one, oldest first (seq, limit).
SELECT seq, node, kind, generation, actor, detail, at FROM event WHERE seq > ? ORDER BY seq
LIMIT ?;

-- name: events_of_node
-- One node's events, oldest first.
SELECT seq, node, kind, generation, actor, detail, at FROM event WHERE node = ? ORDER BY seq;

-- name: events_all
-- Every event, oldest first.
SELECT seq, node, kind, generation, actor, detail, at FROM event ORDER BY seq;

-- name: events_of_node_newest
-- At most a number of one node's newest events, newest first (node, limit): a backward range
-- scan of event_by_node (node, seq) that reads only the rows it returns.
SELECT seq, node, kind, generation, actor, detail, at FROM event WHERE node = ?
ORDER BY seq DESC LIMIT ?;

-- name: events_newest
-- At most a number of the newest events, newest first (limit): a backward scan of the primary
-- key that reads only the rows it returns.
SELECT seq, node, kind, generation, actor, detail, at FROM event ORDER BY seq DESC LIMIT ?;

-- name: events_of_node_after
-- At most a number of one node's events with a sequence number above one, oldest first
-- (node, seq, limit): a range scan of event_by_node from that sequence number on.
SELECT seq, node, kind, generation, actor, detail, at FROM event WHERE node = ? AND seq > ?
ORDER BY seq LIMIT ?;

-- name: events_of_node_kind_after
-- As events_of_node_after, of one kind only (node, seq, kind, limit). The kind is filtered
-- within the node's range after the sequence number (no index on kind): the read is bounded
-- by the node's events since that number, not by its whole history.
SELECT seq, node, kind, generation, actor, detail, at FROM event WHERE node = ? AND seq > ?
AND kind = ? ORDER BY seq LIMIT ?;
