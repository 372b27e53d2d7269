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
-- At most a number of one node's newest events, newest first (node, node, limit): a backward
-- range scan of event_by_node (node, seq) that reads only the rows it returns. The node is
-- matched as a range (>= and <= the same name) and named in the order on purpose: with
-- node = ?, PostgreSQL drops the node from the order and, for a node its statistics call
-- frequent, walks the primary key backwards filtering by node, which reads every later event
-- of every node when that node has gone quiet (measured: 299,000 rows read for 50). A range
-- leaves the order to event_by_node alone.
SELECT seq, node, kind, generation, actor, detail, at FROM event WHERE node >= ? AND node <= ?
ORDER BY node DESC, seq DESC LIMIT ?;

-- name: events_newest
-- At most a number of the newest events, newest first (limit): a backward scan of the primary
-- key that reads only the rows it returns.
SELECT seq, node, kind, generation, actor, detail, at FROM event ORDER BY seq DESC LIMIT ?;

-- name: events_of_node_after
-- At most a number of one node's events with a sequence number above one, oldest first
-- (node, seq, node, limit): a range scan of event_by_node from (node, seq) on. The node is
-- given twice for PostgreSQL's version (postgres/ledger.sql), which bounds the scan by a row
-- comparison for the reason given at events_of_node_newest; here the second is redundant.
SELECT seq, node, kind, generation, actor, detail, at FROM event
WHERE node = ? AND seq > ? AND node <= ? ORDER BY seq LIMIT ?;

-- name: events_of_node_kind_after
-- As events_of_node_after, of one kind only (node, seq, node, kind, limit). The kind is
-- filtered within the node's range after the sequence number (no index on kind): the read is
-- bounded by the node's events since that number, not by its whole history.
SELECT seq, node, kind, generation, actor, detail, at FROM event
WHERE node = ? AND seq > ? AND node <= ? AND kind = ? ORDER BY seq LIMIT ?;
