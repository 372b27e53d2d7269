-- onstation ledger, named queries of the console's idempotency keys
-- (onstation/ledger/idempotency.py). The same SQL on every backend. Parameters are ? in every
-- dialect. Times are integer microseconds since the epoch, UTC.

-- name: idempotency_get
-- The answer kept for one (token, key), if any.
SELECT token_id, key, request_digest, status, response, created_at
FROM api_idempotency WHERE token_id = ? AND key = ?;

-- name: idempotency_insert
-- Keep the first answer to a request; a second insert of the same (token, key) fails, so two
-- racing requests cannot both commit their writes.
INSERT INTO api_idempotency (token_id, key, request_digest, status, response, created_at)
VALUES (?, ?, ?, ?, ?, ?);

-- name: idempotency_insert_if_absent
-- Keep a refused request's answer unless one is already kept (the first answer wins).
INSERT INTO api_idempotency (token_id, key, request_digest, status, response, created_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (token_id, key) DO NOTHING;
