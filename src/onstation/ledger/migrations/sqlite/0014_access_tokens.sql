-- Access tokens of the operator's console (schema version 14; issue 15).

-- `onstation serve` authenticates every request with a bearer token. An operator token
-- names a person; an agent token is bound to one identity and one generation, so a body on
-- another machine can act through the service without database credentials and loses its
-- rights the moment its generation is fenced. Only a SHA-256 digest of the token's secret is
-- kept (the secret is 256 random bits, shown once when the token is created); a revoked
-- token stays, for the record.
CREATE TABLE access_token (
    token_id    TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('operator', 'agent')),
    name        TEXT NOT NULL,
    node        TEXT REFERENCES agent_node(name),
    generation  INTEGER,
    secret_hash TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    created_by  TEXT NOT NULL,
    revoked_at  INTEGER,
    revoked_by  TEXT,
    CHECK ((kind = 'agent') = (node IS NOT NULL AND generation IS NOT NULL))
);

-- The answers to the service's POSTs that carried an Idempotency-Key: the same key from the
-- same token gets the same answer again, without a second write; the same key with another
-- request is refused. request_digest is SHA-256 over the method, the path and the body.
CREATE TABLE api_idempotency (
    token_id       TEXT NOT NULL REFERENCES access_token(token_id),
    key            TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    status         INTEGER NOT NULL,
    response       TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (token_id, key)
);
