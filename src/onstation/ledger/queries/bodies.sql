-- onstation ledger, named queries of the harness records (onstation/ledger/bodies.py):
-- workspaces, harness sessions as bodies, tool calls, telemetry and tier marks. The same SQL
-- on every backend (see onstation/ledger/named_queries.py). Parameters are ? in every
-- dialect. Times are integer microseconds since the epoch, UTC. The workspace lookup among
-- candidate paths is the hook fast path's (onstation/ledger/fastpath.py, WORKSPACE_BINDINGS).

-- name: workspace_binding_delete
-- Forget the binding of exactly one path.
DELETE FROM workspace_binding WHERE path = ?;

-- name: workspace_binding_insert
-- Bind a path to a node for a harness.
INSERT INTO workspace_binding (path, node, harness, bound_at) VALUES (?, ?, ?, ?);

-- name: workspace_binding_node
-- The node exactly one path is bound to.
SELECT node FROM workspace_binding WHERE path = ?;

-- name: workspace_latest_of_node
-- The path most recently bound to a node.
SELECT path FROM workspace_binding WHERE node = ? ORDER BY bound_at DESC LIMIT 1;

-- name: session_by_id
-- One harness session's row.
SELECT session_id, harness, node, generation, lease_id, state, workspace, bound_at,
       relief_requested_at, stop_blocked_at, telemetry_cursor, transcript_path, launcher,
       context_window, context_epoch
FROM body_session WHERE session_id = ?;

-- name: sessions_of_node
-- Every session seen for a node, oldest first.
SELECT session_id, harness, node, generation, lease_id, state, workspace, bound_at,
       relief_requested_at, stop_blocked_at, telemetry_cursor, transcript_path, launcher,
       context_window, context_epoch
FROM body_session WHERE node = ? ORDER BY bound_at, session_id;

-- name: session_live_lease
-- (lease id, generation, holder) of a node's live lease unexpired at a moment.
SELECT lease_id, generation, holder FROM body_lease
WHERE node = ? AND state = 'LIVE' AND expires_at > ?;

-- name: session_lease_holder_set
-- Give a lease to a holder (a session taking a successor lease or a native resume).
UPDATE body_lease SET holder = ? WHERE lease_id = ?;

-- name: session_generation_spent_now
-- Whether the node's current generation ever had a lease (1), else no row. Parameters:
-- node, node.
SELECT 1 FROM body_lease
WHERE node = ? AND generation = (SELECT generation FROM agent_node WHERE name = ?);

-- name: session_insert
-- Record a session seen for the first time (no flags, cursor, transcript, window yet;
-- context epoch 0): the admission takes its row as written (ledger/body_admission.py).
INSERT INTO body_session (session_id, harness, node, generation, lease_id, state, workspace,
                          bound_at, relief_requested_at, stop_blocked_at, telemetry_cursor,
                          transcript_path, launcher)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, NULL, ?);

-- name: session_rejudge
-- Re-bind a known (refused) session: generation, lease, state, time; keep its launcher
-- unless a new one is given. Returns its row as session_by_id reads it.
UPDATE body_session SET generation = ?, lease_id = ?, state = ?, bound_at = ?,
                        launcher = COALESCE(?, launcher)
WHERE session_id = ?
RETURNING session_id, harness, node, generation, lease_id, state, workspace, bound_at,
          relief_requested_at, stop_blocked_at, telemetry_cursor, transcript_path, launcher,
          context_window, context_epoch;

-- name: session_recorded_launcher
-- What the node's newest admitted body that recorded a launcher runs under.
SELECT launcher FROM body_session
WHERE node = ? AND state = 'ADMITTED' AND launcher IS NOT NULL
ORDER BY generation DESC, bound_at DESC LIMIT 1;

-- name: session_flag_relief_requested
-- Stamp relief_requested_at on a session, once.
UPDATE body_session SET relief_requested_at = ?
WHERE session_id = ? AND relief_requested_at IS NULL;

-- name: session_flag_stop_blocked
-- Stamp stop_blocked_at on a session, once.
UPDATE body_session SET stop_blocked_at = ? WHERE session_id = ? AND stop_blocked_at IS NULL;

-- name: session_transcript_set
-- Remember a session's transcript path (only when it changes: path, session, path).
UPDATE body_session SET transcript_path = ?
WHERE session_id = ? AND (transcript_path IS NULL OR transcript_path <> ?);

-- name: session_native_resume
-- Give a session to a new generation and lease, admitted, its flags cleared.
UPDATE body_session SET generation = ?, lease_id = ?, state = 'ADMITTED',
                        relief_requested_at = NULL, stop_blocked_at = NULL, bound_at = ?
WHERE session_id = ?;

-- name: session_cursor_set
-- Remember where a session's transcript was read up to.
UPDATE body_session SET telemetry_cursor = ? WHERE session_id = ?;

-- name: tool_call_delete
-- Forget the effect a tool call dispatched.
DELETE FROM tool_call WHERE tool_use_id = ?;

-- name: tool_call_insert
-- Remember which effect a tool call of a session dispatched.
INSERT INTO tool_call (tool_use_id, session_id, effect_id, at) VALUES (?, ?, ?, ?);

-- name: tool_call_effect
-- The effect a tool call dispatched.
SELECT effect_id FROM tool_call WHERE tool_use_id = ?;

-- name: telemetry_delete
-- Drop a session's fill reading (before storing its latest).
DELETE FROM telemetry WHERE session_id = ?;

-- name: telemetry_insert
-- Store a session's latest fill reading (of its current context epoch).
INSERT INTO telemetry (session_id, node, generation, percent, used_tokens, window_tokens,
                       source, model, tier, reported_at, epoch)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: tier_mark_seen
-- Whether a session already reported a tier in a context epoch (1), else no row.
SELECT 1 FROM tier_mark WHERE session_id = ? AND epoch = ? AND tier = ?;

-- name: tier_mark_insert
-- Mark the first report of a tier by a session in a context epoch.
INSERT INTO tier_mark (session_id, tier, generation, percent, at, epoch)
VALUES (?, ?, ?, ?, ?, ?);

-- name: session_context_window_set
-- Remember the context window the host declared for a session (only when it changes:
-- window, session, window).
UPDATE body_session SET context_window = ?
WHERE session_id = ? AND (context_window IS NULL OR context_window <> ?);

-- name: session_context_epoch
-- A session's current context epoch.
SELECT context_epoch FROM body_session WHERE session_id = ?;

-- name: session_context_epoch_set
-- Start a session's next context epoch (epoch, session, the epoch it replaces).
UPDATE body_session SET context_epoch = ? WHERE session_id = ? AND context_epoch = ?;

-- name: telemetry_of_session
-- The context epoch and source of a session's latest reading.
SELECT epoch, source FROM telemetry WHERE session_id = ?;

-- name: hull_notice_seen
-- Whether a notice was already given for a session, epoch, kind and detail (1), else no row.
SELECT 1 FROM hull_notice WHERE session_id = ? AND epoch = ? AND kind = ? AND detail = ?;

-- name: hull_notice_insert
-- Remember a notice given about a session's readings.
INSERT INTO hull_notice (session_id, epoch, kind, detail, at) VALUES (?, ?, ?, ?, ?);

-- name: telemetry_latest_of_node
-- The most recent fill reading of any body of a node.
SELECT session_id, generation, percent, used_tokens, window_tokens, source, model, tier,
       reported_at
FROM telemetry WHERE node = ? ORDER BY reported_at DESC LIMIT 1;

-- name: body_host_insert
-- Record the host process witness of an admitted session (and, for a continuation, the
-- session it continues and the host's stated source).
INSERT INTO body_host (session_id, node, lease_id, host_witness, continued_from, source, at)
VALUES (?, ?, ?, ?, ?, ?, ?);

-- name: body_hosts_of_lease
-- The sessions of one lease with the host process witness each recorded, oldest first.
SELECT session_id, host_witness FROM body_host WHERE lease_id = ? ORDER BY at, session_id;

-- name: body_hosts_of_node
-- Every admitted session of a node with its host witness, its generation and lease, newest
-- first.
SELECT h.session_id, h.host_witness, s.generation, s.lease_id
FROM body_host h JOIN body_session s ON s.session_id = h.session_id
WHERE h.node = ? AND s.state = 'ADMITTED'
ORDER BY h.at DESC, h.session_id DESC;

-- name: body_host_of_session
-- Whether a session recorded its host process.
SELECT 1 FROM body_host WHERE session_id = ?;

-- name: body_provisional_launch
-- The launch witness of a node's provisional birth under one lease (generation, lease), with
-- the session onstation bound at launch and its launcher record, if any.
SELECT b.launch_witness, s.session_id, s.launcher
FROM birth b
LEFT JOIN body_session s
       ON s.lease_id = b.lease_id AND s.state = 'ADMITTED' AND s.launcher IS NOT NULL
WHERE b.node = ? AND b.generation = ? AND b.lease_id = ? AND b.state = 'PROVISIONAL'
  AND b.launch_witness IS NOT NULL
ORDER BY s.bound_at
LIMIT 1;

-- name: generation_base_of
-- The commit a generation started from, and how it was learnt.
SELECT commit_id, source FROM generation_base WHERE node = ? AND generation = ?;

-- name: generation_base_record
-- Record a generation's base unless one is recorded (the first wins), for a node that
-- exists, in one statement: the commit id when this recorded it; no row when a base was
-- recorded already or there is no such node (the caller then reads which). Parameters:
-- generation, commit, source, time, node.
INSERT INTO generation_base (node, generation, commit_id, source, at)
SELECT name, ?, ?, ?, ? FROM agent_node WHERE name = ?
ON CONFLICT (node, generation) DO NOTHING
RETURNING commit_id;
