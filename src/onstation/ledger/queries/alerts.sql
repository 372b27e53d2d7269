-- onstation ledger, named queries of the console's alerts (onstation/ledger/alerts.py):
-- webhook subscriptions, detected alerts, their deliveries and attempts, and the detection
-- cursor. The same SQL on every backend. Parameters are ? in every dialect. Times are
-- integer microseconds since the epoch, UTC.

-- name: webhook_insert
-- Subscribe a URL; returns the new subscription.
INSERT INTO webhook (url, format, secret, kinds, created_at, created_by)
VALUES (?, ?, ?, ?, ?, ?)
RETURNING webhook_id, url, format, kinds, created_at, created_by, disabled_at, disabled_by;

-- name: webhook_by_id
-- One subscription, disabled or not (without its secret).
SELECT webhook_id, url, format, kinds, created_at, created_by, disabled_at, disabled_by
FROM webhook WHERE webhook_id = ?;

-- name: webhook_list_all
-- Every subscription, oldest first (without secrets).
SELECT webhook_id, url, format, kinds, created_at, created_by, disabled_at, disabled_by
FROM webhook ORDER BY webhook_id;

-- name: webhook_list_enabled
-- The subscriptions in force, oldest first (without secrets).
SELECT webhook_id, url, format, kinds, created_at, created_by, disabled_at, disabled_by
FROM webhook WHERE disabled_at IS NULL ORDER BY webhook_id;

-- name: webhook_disable
-- Remove (disable) a subscription in force; returns its id when it was.
UPDATE webhook SET disabled_at = ?, disabled_by = ?
WHERE webhook_id = ? AND disabled_at IS NULL
RETURNING webhook_id;

-- name: alert_cursor_get
-- The last event seq detection has looked at.
SELECT seq FROM alert_cursor WHERE name = 'events';

-- name: alert_cursor_advance
-- Move the detection cursor forward (never back: two runners may race).
UPDATE alert_cursor SET seq = ? WHERE name = 'events' AND seq < ?;

-- name: alert_insert
-- Record an alert once: an alert id already on record is left as it is (no row returned).
INSERT INTO alert (alert_id, kind, node, generation, summary, evidence, at, detected_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (alert_id) DO NOTHING
RETURNING alert_id;

-- name: alert_by_id
-- One alert.
SELECT alert_id, kind, node, generation, summary, evidence, at, detected_at
FROM alert WHERE alert_id = ?;

-- name: alert_recent
-- The newest alerts by detection time, newest first.
SELECT alert_id, kind, node, generation, summary, evidence, at, detected_at
FROM alert ORDER BY detected_at DESC, alert_id LIMIT ?;

-- name: alert_delivery_insert
-- Owe one delivery of an alert to a subscription, due at a moment (once per pair).
INSERT INTO alert_delivery (alert_id, webhook_id, attempts, next_attempt_at)
VALUES (?, ?, 0, ?)
ON CONFLICT (alert_id, webhook_id) DO NOTHING;

-- name: alert_deliveries_due
-- Deliveries due by a moment, to subscriptions in force, soonest first, with what sending
-- them needs (the subscription's URL, format and secret; the alert).
SELECT d.alert_id, d.webhook_id, d.attempts, d.next_attempt_at, w.url, w.format, w.secret,
       a.kind, a.node, a.generation, a.summary, a.evidence, a.at, a.detected_at
FROM alert_delivery d
JOIN webhook w ON w.webhook_id = d.webhook_id
JOIN alert a ON a.alert_id = d.alert_id
WHERE d.next_attempt_at IS NOT NULL AND d.next_attempt_at <= ? AND w.disabled_at IS NULL
ORDER BY d.next_attempt_at, d.alert_id, d.webhook_id
LIMIT ?;

-- name: alert_deliveries_due_of_alert
-- The deliveries of one alert due by a moment, to subscriptions in force (the same columns
-- as alert_deliveries_due; `webhook test` sends its test alert at once with it).
SELECT d.alert_id, d.webhook_id, d.attempts, d.next_attempt_at, w.url, w.format, w.secret,
       a.kind, a.node, a.generation, a.summary, a.evidence, a.at, a.detected_at
FROM alert_delivery d
JOIN webhook w ON w.webhook_id = d.webhook_id
JOIN alert a ON a.alert_id = d.alert_id
WHERE d.alert_id = ? AND d.next_attempt_at IS NOT NULL AND d.next_attempt_at <= ?
  AND w.disabled_at IS NULL
ORDER BY d.webhook_id
LIMIT ?;

-- name: alert_delivery_claim
-- Claim a due delivery for one attempt (compare-and-swap on its due time): its due time moves
-- to when an unfinished claim lapses, so a runner that died mid-attempt is retried later.
UPDATE alert_delivery SET next_attempt_at = ?
WHERE alert_id = ? AND webhook_id = ? AND next_attempt_at = ? AND attempts = ?
RETURNING attempts;

-- name: alert_delivery_record
-- Record an attempt's outcome on its delivery (compare-and-swap on the attempt count).
UPDATE alert_delivery
SET attempts = attempts + 1, next_attempt_at = ?, last_status = ?, last_error = ?,
    delivered_at = ?, gave_up_at = ?
WHERE alert_id = ? AND webhook_id = ? AND attempts = ?
RETURNING alert_id, webhook_id, attempts, next_attempt_at, last_status, last_error,
          delivered_at, gave_up_at;

-- name: alert_attempt_insert
-- Keep one attempt, failed or not.
INSERT INTO alert_attempt (alert_id, webhook_id, attempt, at, status, error, delivered)
VALUES (?, ?, ?, ?, ?, ?, ?);

-- name: alert_deliveries_of_alert
-- The deliveries of one alert, by subscription.
SELECT alert_id, webhook_id, attempts, next_attempt_at, last_status, last_error, delivered_at,
       gave_up_at
FROM alert_delivery WHERE alert_id = ? ORDER BY webhook_id;

-- name: alert_attempts_of_delivery
-- Every attempt of one delivery, oldest first.
SELECT alert_id, webhook_id, attempt, at, status, error, delivered
FROM alert_attempt WHERE alert_id = ? AND webhook_id = ? ORDER BY attempt_id;

-- name: alert_relief_outcome
-- How one relief ended, for detection: state, verdict, generations and cause.
SELECT relief_id, node, state, verdict, from_generation, to_generation, cause, finished_at
FROM relief WHERE relief_id = ?;

-- name: alert_overdue_leases
-- LIVE leases past their expiry (a body that stopped heartbeating and never released).
SELECT l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at, l.renewed_at,
       l.expires_at, l.ended_at, l.end_reason, l.lease_id
FROM body_lease l WHERE l.state = 'LIVE' AND l.expires_at < ? ORDER BY l.lease_id;
