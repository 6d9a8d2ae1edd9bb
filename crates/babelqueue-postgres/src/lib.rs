//! BabelQueue on PostgreSQL: the transactional outbox and the idempotency store, on
//! [`tokio-postgres`](tokio_postgres).
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::Envelope;
//! use babelqueue_outbox::OutboxRelay;
//! use babelqueue_postgres::{PgOutbox, PgOutboxStore};
//! use babelqueue_transport_redis::RedisTransport;
//!
//! let url = "postgres://bq:bq@127.0.0.1:5432/bq";
//!
//! // Once: create the outbox table (or ship PgOutbox::schema_sql() with your migrations).
//! let store = PgOutboxStore::connect(url).await?;
//! store.migrate().await?;
//!
//! // Write side: the message commits or rolls back with the business row.
//! let mut client = babelqueue_postgres::connect(url).await?;
//! let tx = client.transaction().await?;
//! tx.execute("INSERT INTO orders (id, total) VALUES ($1, $2)", &[&1042_i64, &99.9_f64]).await?;
//! let envelope = Envelope::builder("urn:babel:orders:created")
//!     .queue("orders")
//!     .data(&serde_json::json!({"order_id": 1042}))
//!     .build()?;
//! PgOutbox::new().write(&tx, &envelope).await?;
//! tx.commit().await?;
//!
//! // Read side: publish what was committed, byte for byte.
//! let redis = RedisTransport::connect("redis://127.0.0.1:6379").await?;
//! let relay = OutboxRelay::builder(redis, store).build()?;
//! relay.drain().await?;
//! # Ok(()) }
//! ```
//!
//! # The outbox
//!
//! [`PgOutbox`] is the write side: [`PgOutbox::write`] inserts the encoded envelope through the
//! client or [`Transaction`](tokio_postgres::Transaction) you pass, and never begins or commits
//! anything. [`PgOutboxStore`] is the relay side, an
//! [`OutboxStore`](babelqueue_outbox::OutboxStore) on a connection of its own: each claim opens
//! a transaction, locks the oldest pending, due rows with `FOR UPDATE SKIP LOCKED` (so two
//! relays never hold one row), and the settlement records every outcome and commits. The table
//! (`sql/outbox.sql`, installed by [`PgOutboxStore::migrate`]):
//!
//! | column | |
//! |---|---|
//! | `id BIGINT` identity | claim order (oldest first) |
//! | `queue TEXT`, `body BYTEA`, `headers JSONB` | what the relay publishes, unchanged |
//! | `status TEXT` | `pending`, `published` or `parked` |
//! | `attempts INTEGER`, `last_error TEXT`, `failed_at` | the failures so far |
//! | `next_attempt_at TIMESTAMPTZ` | a pending row is claimed only after this (back-off) |
//! | `created_at`, `published_at` | timestamps |
//!
//! # The idempotency store
//!
//! [`PgIdempotencyStore`] keeps handled `meta.id`s for
//! [`babelqueue_core::idempotency::idempotent`]: a claim is an `INSERT … ON CONFLICT` on the
//! primary key, so of two concurrent deliveries of one id exactly one runs the handler; the
//! other sees it in flight (and is retried) or done (and is acknowledged). A failed handler's
//! claim is forgotten, so the redelivery runs it again. Table: `sql/idempotency.sql`.
//!
//! # Connections and TLS
//!
//! [`connect`] and the stores' `connect` take a `postgres://` URL (or a `key=value` string).
//! TLS is rustls with the aws-lc-rs provider, never OpenSSL or ring: `sslmode=require`
//! insists on it, the default `prefer` uses it when the server offers it. Certificates are
//! always verified, against the public web roots or the PEM file named by `sslrootcert=` (or
//! `ca_file=`) in the URL; `sslcert=` + `sslkey=` (or `cert_file=` + `key_file=`) present a
//! client certificate. A store built from a URL reconnects after a lost connection.

mod connect;
mod error;
mod idempotency;
mod outbox;
mod table;

pub use connect::{Connector, DEFAULT_CONNECT_TIMEOUT, connect};
pub use error::{Error, ErrorKind};
pub use idempotency::{
    DEFAULT_CLAIM_TIMEOUT, DEFAULT_IDEMPOTENCY_TABLE, IDEMPOTENCY_SQL, PgIdempotencyStore,
};
pub use outbox::{
    DEFAULT_OUTBOX_TABLE, OUTBOX_SQL, OutboxCounts, PgOutbox, PgOutboxStore, PgWriter,
};
pub use table::Table;
pub use tokio_postgres;
