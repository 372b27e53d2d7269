-- onstation ledger, named queries of the relief records (onstation/ledger/relief_records.py):
-- tasks, successor births and their challenges, reservations and reliefs. The same SQL on every
-- backend (see onstation/ledger/named_queries.py). Parameters are ? in every dialect. Times are
-- integer microseconds since the epoch, UTC.

-- name: task_exists
-- One row when a task of that id exists, none otherwise.
SELECT 1 FROM task WHERE task_id = ?;

-- name: task_owner_node_exists
-- One row when an agent node of that name exists (a task owner that is a node), none otherwise.
SELECT 1 FROM agent_node WHERE name = ?;

-- name: task_insert
-- Create a task; returns the new row.
INSERT INTO task (title, owner, status, notes, brief_path, parent_id, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
RETURNING task_id, title, owner, status, notes, brief_path, parent_id, created_at, updated_at;

-- name: task_by_id
-- One task by its id.
SELECT task_id, title, owner, status, notes, brief_path, parent_id, created_at, updated_at
FROM task WHERE task_id = ?;

-- name: task_update
-- Set a task's status, owner, notes, brief path and update time; returns the updated row.
UPDATE task SET status = ?, owner = ?, notes = ?, brief_path = ?, updated_at = ?
WHERE task_id = ?
RETURNING task_id, title, owner, status, notes, brief_path, parent_id, created_at, updated_at;

-- name: task_list_all
-- Every task, oldest first.
SELECT task_id, title, owner, status, notes, brief_path, parent_id, created_at, updated_at
FROM task ORDER BY task_id;

-- name: task_list_of_owner
-- The tasks of one owner, oldest first.
SELECT task_id, title, owner, status, notes, brief_path, parent_id, created_at, updated_at
FROM task WHERE owner = ? ORDER BY task_id;

-- name: birth_insert_provisional
-- Record a PROVISIONAL successor birth and its challenge (no witnesses yet); returns the row.
INSERT INTO birth (node, generation, lease_id, state, challenge, challenge_digest,
                   launch_witness, answer_witness, launched_at, answered_at, decided_at, reason)
VALUES (?, ?, ?, 'PROVISIONAL', ?, ?, NULL, NULL, ?, NULL, NULL, NULL)
RETURNING node, generation, lease_id, state, challenge, challenge_digest, launch_witness,
          answer_witness, launched_at, answered_at, decided_at, reason;

-- name: birth_set_launch_witness
-- Record the process witness observed when one generation's successor was launched.
UPDATE birth SET launch_witness = ? WHERE node = ? AND generation = ?;

-- name: birth_by_generation
-- The birth record of one generation of a node.
SELECT node, generation, lease_id, state, challenge, challenge_digest, launch_witness,
       answer_witness, launched_at, answered_at, decided_at, reason
FROM birth WHERE node = ? AND generation = ?;

-- name: birth_answer
-- Record a birth's challenge answer (time and witness); returns the updated row.
UPDATE birth SET answered_at = ?, answer_witness = ?
WHERE node = ? AND generation = ?
RETURNING node, generation, lease_id, state, challenge, challenge_digest, launch_witness,
          answer_witness, launched_at, answered_at, decided_at, reason;

-- name: birth_decide
-- Decide a PROVISIONAL birth (RUNNING or BIRTH_FAILED, with time and reason); returns the
-- updated row, none when the birth was not provisional.
UPDATE birth SET state = ?, decided_at = ?, reason = ?
WHERE node = ? AND generation = ? AND state = 'PROVISIONAL'
RETURNING node, generation, lease_id, state, challenge, challenge_digest, launch_witness,
          answer_witness, launched_at, answered_at, decided_at, reason;

-- name: reservation_exists
-- Whether a reservation id was ever made (a row, or none).
SELECT 1 FROM reservation WHERE reservation_id = ?;

-- name: reservation_insert
-- Reserve capacity for one attempt (state RESERVED).
INSERT INTO reservation (reservation_id, node, generation, execution_class, evidence_digest,
                         state, created_at)
VALUES (?, ?, ?, ?, ?, 'RESERVED', ?);

-- name: reservation_settle
-- Settle (SETTLED or RELEASED) a RESERVED reservation; returns its node and generation, none
-- when it was not reserved.
UPDATE reservation SET state = ?, settled_at = ?
WHERE reservation_id = ? AND state = 'RESERVED'
RETURNING node, generation;

-- name: relief_open_of_node
-- The relief in progress (not finished) of one identity: its id and start time.
SELECT relief_id, started_at FROM relief WHERE node = ? AND finished_at IS NULL;

-- name: relief_abandon
-- Close an abandoned relief as ABANDONED at a moment.
UPDATE relief SET state = 'ABANDONED', finished_at = ? WHERE relief_id = ?;

-- name: relief_insert
-- Start a relief (state REQUESTED, empty detail); returns the new row.
INSERT INTO relief (node, from_generation, state, cause, started_at, detail)
VALUES (?, ?, 'REQUESTED', ?, ?, '{}')
RETURNING relief_id, node, from_generation, to_generation, state, verdict, cause, started_at,
          finished_at, report_path, detail;

-- name: relief_by_id
-- One relief by its id.
SELECT relief_id, node, from_generation, to_generation, state, verdict, cause, started_at,
       finished_at, report_path, detail
FROM relief WHERE relief_id = ?;

-- name: relief_update
-- Move a relief to a state; verdict, successor generation and report path change only when
-- given (non-NULL); it finishes at the given moment when the flag is 1. Returns the row.
UPDATE relief SET state = ?, verdict = COALESCE(?, verdict),
       to_generation = COALESCE(?, to_generation), detail = ?,
       finished_at = CASE WHEN ? = 1 THEN ? ELSE finished_at END,
       report_path = COALESCE(?, report_path)
WHERE relief_id = ?
RETURNING relief_id, node, from_generation, to_generation, state, verdict, cause, started_at,
          finished_at, report_path, detail;

-- name: relief_update_keeping_detail
-- relief_update for a step that adds nothing to the detail: the detail stays as stored (no
-- read of it first). Returns the row, none when there is no such relief.
UPDATE relief SET state = ?, verdict = COALESCE(?, verdict),
       to_generation = COALESCE(?, to_generation),
       finished_at = CASE WHEN ? = 1 THEN ? ELSE finished_at END,
       report_path = COALESCE(?, report_path)
WHERE relief_id = ?
RETURNING relief_id, node, from_generation, to_generation, state, verdict, cause, started_at,
          finished_at, report_path, detail;

-- name: relief_list_all
-- Every relief, oldest first.
SELECT relief_id, node, from_generation, to_generation, state, verdict, cause, started_at,
       finished_at, report_path, detail
FROM relief ORDER BY relief_id;

-- name: relief_list_of_node
-- The reliefs of one identity, oldest first.
SELECT relief_id, node, from_generation, to_generation, state, verdict, cause, started_at,
       finished_at, report_path, detail
FROM relief WHERE node = ? ORDER BY relief_id;
