-- onstation ledger, named queries of the tool-call journal (onstation/ledger/tool_outcomes.py):
-- the outcome of each tool call of an admitted body, as its hooks reported it. The same SQL on
-- every backend (see onstation/ledger/named_queries.py). Parameters are ? in every dialect.
-- Times are integer microseconds since the epoch, UTC.

-- name: tool_outcome_insert
-- Journal one tool call's outcome.
INSERT INTO tool_call_outcome (node, generation, session_id, tool_use_id, tool, call_summary,
                               outcome, exit_code, detail, at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: tool_outcomes_of_generation
-- The newest rows of one generation (at most the limit given), in call order.
SELECT id, node, generation, session_id, tool_use_id, tool, call_summary, outcome, exit_code,
       detail, at
FROM (SELECT id, node, generation, session_id, tool_use_id, tool, call_summary, outcome,
             exit_code, detail, at
      FROM tool_call_outcome WHERE node = ? AND generation = ? ORDER BY id DESC LIMIT ?) AS newest
ORDER BY id;
