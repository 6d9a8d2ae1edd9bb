-- BabelQueue idempotency store (consumer-side dedupe on meta.id), PostgreSQL 11 or newer.
--
-- `{table}` and `{expires_index}` are replaced by the configured names (default
-- `babelqueue_idempotency` and `babelqueue_idempotency_expires_idx`);
-- PgIdempotencyStore::schema_sql() returns this script with the names filled in.
--
-- The primary key is the lock: INSERT ... ON CONFLICT lets exactly one of several concurrent
-- deliveries of one id claim it.
CREATE TABLE IF NOT EXISTS {table} (
    message_id   TEXT        PRIMARY KEY,
    -- When the id was (last) claimed.
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- NULL: a delivery holds the claim and has not finished; set: handled successfully.
    completed_at TIMESTAMPTZ,
    -- After this time the row counts as absent (an abandoned claim, or a handled id past its
    -- retention); NULL: never.
    expires_at   TIMESTAMPTZ
);

-- Housekeeping of expired rows (PgIdempotencyStore::purge_expired).
CREATE INDEX IF NOT EXISTS {expires_index} ON {table} (expires_at) WHERE expires_at IS NOT NULL;
