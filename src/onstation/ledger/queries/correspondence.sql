-- onstation ledger, named queries of correspondence (onstation/ledger/correspondence.py):
-- messages, notes and decisions, and hand-over documents. The same SQL on every backend (see
-- onstation/ledger/named_queries.py). Parameters are ? in every dialect. Times are integer
-- microseconds since the epoch, UTC.

-- name: message_replied_to
-- Recipient, kind and generation of the message a reply answers.
SELECT recipient, kind, generation FROM message WHERE message_id = ?;

-- name: message_insert
-- Queue a message; returns its id.
INSERT INTO message (sender, recipient, kind, body, reply_to, created_at, generation,
                     sender_generation)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
RETURNING message_id;

-- name: message_mark_answered
-- A reply was written: the message it answers is answered now (the first reply's time), so
-- that it leaves the open exchanges' index. Parameters: now, the answered message's id.
UPDATE message SET answered_at = ? WHERE message_id = ? AND answered_at IS NULL;

-- name: message_recipient_node
-- The recipient's name if it is a node (no row for an actor).
SELECT name FROM agent_node WHERE name = ?;

-- name: message_take_all
-- Mark every undelivered message of a recipient delivered; returns them.
UPDATE message SET delivered_at = ?, delivered_to = ?
WHERE recipient = ? AND delivered_at IS NULL
RETURNING message_id, sender, recipient, kind, body, reply_to, created_at, delivered_at,
          generation, sender_generation;

-- name: message_take_generation
-- Mark a recipient's undelivered messages addressed to one generation delivered (a fenced
-- body's take); returns them.
UPDATE message SET delivered_at = ?, delivered_to = ?
WHERE recipient = ? AND delivered_at IS NULL AND generation = ?
RETURNING message_id, sender, recipient, kind, body, reply_to, created_at, delivered_at,
          generation, sender_generation;

-- name: message_take_for_body
-- Mark a recipient's undelivered messages addressed to one generation or to the identity at
-- large delivered; returns them.
UPDATE message SET delivered_at = ?, delivered_to = ?
WHERE recipient = ? AND delivered_at IS NULL AND (generation IS NULL OR generation = ?)
RETURNING message_id, sender, recipient, kind, body, reply_to, created_at, delivered_at,
          generation, sender_generation;

-- name: message_waiting_all
-- Whether a recipient has an undelivered message (1), else no row.
SELECT 1 FROM message WHERE recipient = ? AND delivered_at IS NULL LIMIT 1;

-- name: message_waiting_generation
-- Whether a recipient has an undelivered message addressed to one generation (1), else no row.
SELECT 1 FROM message WHERE recipient = ? AND delivered_at IS NULL AND generation = ? LIMIT 1;

-- name: message_waiting_for_body
-- Whether a recipient has an undelivered message addressed to one generation or to the
-- identity at large (1), else no row.
SELECT 1 FROM message
WHERE recipient = ? AND delivered_at IS NULL AND (generation IS NULL OR generation = ?) LIMIT 1;

-- name: message_expire_all
-- Mark every undelivered message of a recipient expired.
UPDATE message SET delivered_at = ?, delivered_to = ?
WHERE recipient = ? AND delivered_at IS NULL;

-- name: message_expire_through_generation
-- Mark a recipient's undelivered messages addressed to a generation or an earlier one
-- expired (those to the identity at large wait).
UPDATE message SET delivered_at = ?, delivered_to = ?
WHERE recipient = ? AND delivered_at IS NULL AND generation <= ?;

-- name: messages_of_recipient
-- Every message for a recipient, delivered or not, oldest first.
SELECT message_id, sender, recipient, kind, body, reply_to, created_at, delivered_at,
       generation, sender_generation
FROM message WHERE recipient = ? ORDER BY message_id;

-- name: message_open_exchanges
-- APPROACH or CHECKPOINT messages to a node that have no reply yet, oldest first.
SELECT m.message_id, m.sender, m.recipient, m.kind, m.body, m.reply_to, m.created_at,
       m.delivered_at, m.generation, m.sender_generation
FROM message m
WHERE m.recipient = ? AND m.kind IN ('APPROACH', 'CHECKPOINT') AND m.answered_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM message r WHERE r.reply_to = m.message_id)
ORDER BY m.message_id;

-- name: note_insert
-- Record a decision or note; returns its id.
INSERT INTO note (node, generation, kind, text, rationale, at) VALUES (?, ?, ?, ?, ?, ?)
RETURNING note_id;

-- name: notes_of_node
-- A node's decisions and notes, oldest first.
SELECT note_id, node, generation, kind, text, rationale, at FROM note
WHERE node = ? ORDER BY note_id;

-- name: document_insert
-- Keep a brief, manifest or other document (late = 1: written by a fenced body); returns its
-- id.
INSERT INTO document (node, generation, kind, path, content, digest, at, late)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
RETURNING document_id;

-- name: document_latest
-- The newest document of a kind of a node that is not late.
SELECT document_id, node, generation, kind, path, content, digest, at, late FROM document
WHERE node = ? AND kind = ? AND late = 0 ORDER BY document_id DESC LIMIT 1;

-- name: documents_late_since
-- A node's late documents after a document id, oldest first.
SELECT document_id, node, generation, kind, path, content, digest, at, late FROM document
WHERE node = ? AND late = 1 AND document_id > ? ORDER BY document_id;

-- name: stored_object_insert
-- Keep a capsule or plan under its digest, for a node that exists (digest, kind, body, at,
-- node); returns the digest when it was new, no row when the node does not exist or the
-- digest is stored already (the same digest is stored once).
INSERT INTO stored_object (digest, kind, node, body, at)
SELECT ?, ?, name, ?, ? FROM agent_node WHERE name = ?
ON CONFLICT (digest) DO NOTHING
RETURNING digest;

-- name: stored_object_by_digest
-- One stored object by its full digest.
SELECT digest, kind, node, body, at FROM stored_object WHERE digest = ?;

-- name: stored_objects_by_prefix
-- Stored objects of one kind whose digest starts with a prefix (at most two: enough to tell
-- a unique prefix from an ambiguous one).
SELECT digest, kind, node, body, at FROM stored_object
WHERE kind = ? AND digest LIKE ? ORDER BY digest LIMIT 2;
