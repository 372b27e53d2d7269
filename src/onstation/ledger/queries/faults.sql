-- onstation ledger, named queries of the simulator's planted faults (onstation/ledger/faults.py).
-- THESE ARE DELIBERATE BUGS: each query below is the SQL of one planted fault, run only inside
-- `with planted(name):` for `onstation simulate --plant NAME`, to prove the simulator's checks
-- catch it. Nothing else may use them. Parameters are ? in every dialect.

-- name: fault_fence_keeps_lease
-- PLANTED FAULT "fence-keeps-lease": the fence's compare-and-swap on the generation alone,
-- leaving the old generation's leases and grants live; returns the new generation.
UPDATE agent_node SET generation = generation + 1
WHERE name = ? AND generation = ? RETURNING generation;

-- name: fault_breaker_forgets_on_restart
-- PLANTED FAULT "breaker-forgets-on-restart": close every node's breaker when the ledger opens.
UPDATE agent_node SET breaker_open = 0, breaker_reason = NULL;
