-- Alerts of the operator's console: webhook subscriptions, detected alerts, their deliveries
-- and every delivery attempt (schema version 15; issue 15).

-- A subscription is a URL, a body format and the HMAC secret its requests are signed with.
-- The secret is kept as it is (the sender needs it to sign; a digest would not do), which is
-- why the ledger file is private to its owner. `kinds` is a JSON list of alert kinds; an
-- empty list means every kind. A removed subscription stays, disabled, for the record.
CREATE TABLE webhook (
    webhook_id   BIGSERIAL PRIMARY KEY,
    url          TEXT NOT NULL,
    format       TEXT NOT NULL CHECK (format IN ('generic', 'slack')),
    secret       TEXT NOT NULL,
    kinds        TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    created_by   TEXT NOT NULL,
    disabled_at  BIGINT,
    disabled_by  TEXT
);

-- One alert per condition, under a stable id: detection may see a condition many times, the
-- alert is recorded once. `at` is when the condition arose (the event's time, a lease's
-- expiry); `evidence` is JSON (event seq, relief id, effect id, lease id ...).
CREATE TABLE alert (
    alert_id     TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    node         TEXT,
    generation   BIGINT,
    summary      TEXT NOT NULL,
    evidence     TEXT NOT NULL,
    at           BIGINT NOT NULL,
    detected_at  BIGINT NOT NULL
);
CREATE INDEX alert_by_detection ON alert (detected_at);

-- One delivery per alert and subscription. `next_attempt_at` is NULL once the delivery is
-- finished (delivered, or given up after the last attempt).
CREATE TABLE alert_delivery (
    alert_id         TEXT NOT NULL REFERENCES alert(alert_id),
    webhook_id       BIGINT NOT NULL REFERENCES webhook(webhook_id),
    attempts         BIGINT NOT NULL,
    next_attempt_at  BIGINT,
    last_status      BIGINT,
    last_error       TEXT,
    delivered_at     BIGINT,
    gave_up_at       BIGINT,
    PRIMARY KEY (alert_id, webhook_id)
);
CREATE INDEX alert_delivery_due ON alert_delivery (next_attempt_at)
    WHERE next_attempt_at IS NOT NULL;

-- Every attempt, failed or not: the HTTP status (NULL when no answer came) and the error.
CREATE TABLE alert_attempt (
    attempt_id   BIGSERIAL PRIMARY KEY,
    alert_id     TEXT NOT NULL,
    webhook_id   BIGINT NOT NULL,
    attempt      BIGINT NOT NULL,
    at           BIGINT NOT NULL,
    status       BIGINT,
    error        TEXT,
    delivered    BIGINT NOT NULL CHECK (delivered IN (0, 1)),
    FOREIGN KEY (alert_id, webhook_id) REFERENCES alert_delivery(alert_id, webhook_id)
);
CREATE INDEX alert_attempt_of_delivery ON alert_attempt (alert_id, webhook_id, attempt_id);

-- How far detection has read the history (the last event seq it has looked at).
CREATE TABLE alert_cursor (
    name  TEXT PRIMARY KEY,
    seq   BIGINT NOT NULL
);
INSERT INTO alert_cursor (name, seq) VALUES ('events', 0);
