-- onstation ledger, PostgreSQL's own versions of named queries of onstation/ledger/ledger.py
-- (each replaces the portable block of the same name in ../ledger.sql).

-- name: events_of_node_after
-- At most a number of one node's events with a sequence number above one, oldest first
-- (node, seq, node, limit). With node = ? the planner may walk the primary key from the
-- sequence number on, filtering by node, for a node its statistics call frequent: every later
-- event of every node is read when that node has gone quiet. The row comparison starts the
-- scan of event_by_node at (node, seq) and the bound on node ends it: only the rows returned
-- are read.
SELECT seq, node, kind, generation, actor, detail, at FROM event
WHERE (node, seq) > (?, ?) AND node <= ? ORDER BY node, seq LIMIT ?;

-- name: events_of_node_kind_after
-- As events_of_node_after, of one kind only (node, seq, node, kind, limit); the kind is
-- filtered within the node's range after the sequence number.
SELECT seq, node, kind, generation, actor, detail, at FROM event
WHERE (node, seq) > (?, ?) AND node <= ? AND kind = ? ORDER BY node, seq LIMIT ?;
