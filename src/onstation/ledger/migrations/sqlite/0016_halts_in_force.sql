-- The halts in force, found without reading every halt ever raised (schema version 16).

-- Every admission, every new effect and the team lead's every poll asks whether a halt in
-- force covers a node (lifted_at IS NULL). Lifted halts stay on record for good, and with
-- no index each of those questions read all of them: the cost grew with the ledger's past
-- (100,000 lifted halts made a fence and an admission 40 times slower). The halts in force
-- are few, so a partial index over them keeps every such question flat.
CREATE INDEX halt_in_force ON halt (halt_id) WHERE lifted_at IS NULL;
