-- onstation ledger, PostgreSQL's own versions of named queries of
-- onstation/ledger/correspondence.py (each replaces the portable block of the same name in
-- ../correspondence.sql).

-- name: message_open_exchanges
-- As the portable query (recipient). The recipient is compared through a one-row subquery,
-- whose value the planner does not see even when it plans for this very call. With the value
-- in sight, the estimate for a frequent recipient (a team lead's replies fill the statistics)
-- differs from the one a generic plan makes, and a prepared statement keeps planning a plan
-- of its own for every call: 0.17 ms of planning for 0.02 ms of reading the partial index,
-- from about 100k messages on. With the value hidden, both estimates agree and the generic
-- plan, made once, is kept: the same index scan, without the planning.
SELECT m.message_id, m.sender, m.recipient, m.kind, m.body, m.reply_to, m.created_at,
       m.delivered_at, m.generation, m.sender_generation
FROM message m
WHERE m.recipient = (SELECT CAST(? AS TEXT)) AND m.kind IN ('APPROACH', 'CHECKPOINT')
  AND m.answered_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM message r WHERE r.reply_to = m.message_id)
ORDER BY m.message_id;
