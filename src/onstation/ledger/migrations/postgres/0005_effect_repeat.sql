-- Deliberate repeats of one logical effect (schema version 5, PostgreSQL).
--
-- An approval slot no longer makes an effect new by itself: a second effect with the same
-- identity (node, operation, destination, arguments) is recorded only as a declared repeat,
-- which names the effect it repeats and why.
ALTER TABLE effect ADD COLUMN repeat_of TEXT REFERENCES effect(effect_id);
ALTER TABLE effect ADD COLUMN repeat_reason TEXT;

-- Earlier ledgers let a slot alone record the same identity twice. Of each such group, the
-- unslotted effect (or else the oldest) stays the logical effect and the others become its
-- repeats, so presenting the identity again finds one effect, never a random one of them.
UPDATE effect SET repeat_of = (
    SELECT o.effect_id FROM effect o
    WHERE o.node = effect.node AND o.operation = effect.operation
      AND o.destination = effect.destination AND o.arguments = effect.arguments
    ORDER BY (o.approval_slot IS NOT NULL), o.created_at, o.effect_id
    LIMIT 1
);
UPDATE effect SET repeat_of = NULL WHERE repeat_of = effect_id;
UPDATE effect SET repeat_reason = 'recorded under approval slot ' || approval_slot
    || ' before repeats had to be declared'
    WHERE repeat_of IS NOT NULL;

-- The logical effect is looked up by its identity when its fingerprint covers a slot (an
-- effect recorded before schema 5 under a slot).
CREATE INDEX effect_by_identity ON effect(node, operation, destination);
