-- onstation ledger, named queries of the console's access tokens (onstation/ledger/tokens.py).
-- The same SQL on every backend. Parameters are ? in every dialect. Times are integer
-- microseconds since the epoch, UTC.

-- name: token_insert
-- Keep a new token (its secret's digest only).
INSERT INTO access_token (token_id, kind, name, node, generation, secret_hash, created_at,
                          created_by)
VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: token_by_id
-- One token, revoked or not.
SELECT token_id, kind, name, node, generation, created_at, created_by, revoked_at, revoked_by,
       secret_hash
FROM access_token WHERE token_id = ?;

-- name: token_list
-- Every token, newest first.
SELECT token_id, kind, name, node, generation, created_at, created_by, revoked_at, revoked_by,
       secret_hash
FROM access_token ORDER BY created_at DESC, token_id;

-- name: token_revoke
-- Revoke a token that is not revoked yet; returns it when it was.
UPDATE access_token SET revoked_at = ?, revoked_by = ?
WHERE token_id = ? AND revoked_at IS NULL
RETURNING token_id;
