-- BabelQueue transactional outbox, PostgreSQL 11 or newer.
--
-- `{table}` and `{pending_index}` are replaced by the configured names (default
-- `babelqueue_outbox` and `babelqueue_outbox_pending_idx`); PgOutbox::schema_sql() returns this
-- script with the names filled in, for your own migration tool.
--
-- The producer inserts a row inside its own business transaction; a relay claims pending, due
-- rows oldest first with FOR UPDATE SKIP LOCKED, publishes `body` byte for byte, and marks each
-- row published, or records the failure and the next try time, before it commits.
CREATE TABLE IF NOT EXISTS {table} (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The queue the relay publishes to.
    queue           TEXT        NOT NULL,
    -- The encoded envelope, exactly the bytes that go to the broker.
    body            BYTEA       NOT NULL,
    -- Out-of-band headers published beside the body (a W3C traceparent ...), string to string.
    headers         JSONB       NOT NULL DEFAULT '{}'::jsonb,
    -- pending: waiting (see next_attempt_at); published: the broker accepted it;
    -- parked: its attempts ran out, no relay touches it again.
    status          TEXT        NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'published', 'parked')),
    -- Failed publishes so far, and the last failure's text.
    attempts        INTEGER     NOT NULL DEFAULT 0,
    last_error      TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- A pending row is claimed only once this time has passed (back-off after a failure).
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    published_at    TIMESTAMPTZ,
    failed_at       TIMESTAMPTZ
);

-- The relay's claim: pending rows in id order.
CREATE INDEX IF NOT EXISTS {pending_index} ON {table} (id) WHERE status = 'pending';
