-- onstation ledger, named queries of the nodes aggregate (onstation/ledger/nodes.py):
-- identities, actors, work episodes and runs. The same SQL on every backend (see
-- onstation/ledger/named_queries.py). Parameters are ? in every dialect. Times are integer
-- microseconds since the epoch, UTC.

-- name: node_exists
-- 1 when a node of that name is registered, no row otherwise.
SELECT 1 FROM agent_node WHERE name = ?;

-- name: node_generation
-- The node's current generation alone, no row when no node has that name.
SELECT generation FROM agent_node WHERE name = ?;

-- name: node_insert
-- Register an identity (name, role, spawner, created_at) at generation 1, ACTIVE.
INSERT INTO agent_node (name, role, spawner, generation, state, created_at)
VALUES (?, ?, ?, 1, 'ACTIVE', ?);

-- name: nodes_all
-- Every node, by name.
SELECT name, role, spawner, generation, state, created_at, breaker_open, breaker_reason
FROM agent_node ORDER BY name;

-- name: actor_exists
-- 1 when an actor of that name exists, no row otherwise.
SELECT 1 FROM actor WHERE name = ?;

-- name: actor_insert
-- Record an actor (name, holding node or NULL, created_at).
INSERT INTO actor (name, node, created_at) VALUES (?, ?, ?);

-- name: actors_all
-- Every actor, by name.
SELECT name, node, created_at FROM actor ORDER BY name;

-- name: episode_open_exists
-- 1 when the node has an open episode, no row otherwise.
SELECT 1 FROM work_episode WHERE node = ? AND state = 'OPEN';

-- name: episode_insert
-- Open an episode (node, objective, opened_at); returns its id.
INSERT INTO work_episode (node, objective, state, opened_at) VALUES (?, ?, 'OPEN', ?)
RETURNING episode_id;

-- name: episode_open_of_node
-- The node's open episode: its id, objective and opening time.
SELECT episode_id, objective, opened_at FROM work_episode WHERE node = ? AND state = 'OPEN';

-- name: episode_settle
-- Settle one episode (closed_at, episode_id).
UPDATE work_episode SET state = 'SETTLED', closed_at = ? WHERE episode_id = ?;

-- name: episodes_of_node
-- The node's episodes, oldest first.
SELECT episode_id, node, objective, state, opened_at, closed_at
FROM work_episode WHERE node = ? ORDER BY episode_id;

-- name: episodes_open_of_node
-- The node's open episode (at most one, by work_episode_one_open, through which it is read):
-- not the settled ones before it.
SELECT episode_id, node, objective, state, opened_at, closed_at
FROM work_episode WHERE node = ? AND state = 'OPEN' ORDER BY episode_id;

-- name: runs_of_node
-- The node's execution attempts, oldest first.
SELECT run_id, node, generation, lease_id, episode_id, started_at, ended_at, outcome
FROM agent_run WHERE node = ? ORDER BY run_id;
