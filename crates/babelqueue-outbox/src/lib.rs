//! The transactional outbox: write a message in the same database transaction as the business
//! data, publish it afterwards.
//!
//! Publishing to a broker inside a request that also commits to a database is a dual write: a
//! crash between the two loses the message or sends one for data that was rolled back. With an
//! outbox the encoded envelope is inserted into an outbox table *inside the caller's own
//! transaction*, so it commits or rolls back with the business row; an [`OutboxRelay`] then
//! publishes committed rows through any [`Transport`](babelqueue_core::Transport), byte for
//! byte as stored, and marks each published only once the broker accepted it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{Envelope, MemoryTransport};
//! use babelqueue_outbox::{MemoryOutbox, Outbox, OutboxRelay};
//!
//! let outbox = MemoryOutbox::new(); // production: babelqueue-postgres's PgOutboxStore
//!
//! // Write side: inside the caller's transaction.
//! let tx = outbox.transaction();
//! let envelope = Envelope::builder("urn:babel:orders:created")
//!     .queue("orders")
//!     .data(&serde_json::json!({"order_id": 1042}))
//!     .build()?;
//! Outbox::new(&tx).write(&envelope).await?;
//! tx.commit(); // the business row and the message, together
//!
//! // Read side: a relay publishes what was committed.
//! let broker = MemoryTransport::new();
//! let relay = OutboxRelay::builder(broker.clone(), outbox.clone()).build()?;
//! let report = relay.drain().await?;
//! assert_eq!(report.published, 1);
//! assert_eq!(broker.bodies("orders"), vec![envelope.encode()?.into_bytes()]);
//! # Ok(()) }
//! ```
//!
//! # Pieces
//!
//! * [`Outbox`] encodes an envelope with the shared codec and saves it through an
//!   [`OutboxWriter`], a handle on the caller's open transaction (it never begins or commits
//!   one).
//! * [`OutboxStore`] is the relay's seam: [`claim`](OutboxStore::claim) hands out due rows
//!   oldest first and holds them exclusively; the [`ClaimedBatch`] records every outcome in one
//!   step ([`Settlement`]).
//! * [`OutboxRelay`] runs passes: [`flush`](OutboxRelay::flush) (one batch),
//!   [`drain`](OutboxRelay::drain) (until empty), [`run`](OutboxRelay::run) (until shut down).
//! * [`MemoryOutbox`] is the in-process store, with a modelled transaction, for tests.
//!
//! # Differences from the reference SDKs
//!
//! * A failed row is not retried after an in-process sleep: its next try time is stored
//!   (bounded exponential back-off), so a pass never stalls and every relay sees the delay.
//! * A row can be parked after `max_attempts` failures (off by default).
//! * Claims hold rows for the whole pass and every outcome of the pass is recorded at once.
//! * Rows may carry out-of-band headers (a `traceparent`), published beside the body.
//! * A claim with a `limit` of 0 returns no row.

mod error;
mod memory;
mod message;
mod outbox;
mod relay;
mod store;

pub use error::{Error, ErrorKind, Result};
pub use memory::{MemoryOutbox, MemoryTransaction, RowSnapshot, RowStatus};
pub use message::{DEFAULT_QUEUE, OutboxId, OutboxMessage, OutboxRecord};
pub use outbox::Outbox;
pub use relay::{MAX_ERROR_LEN, OutboxRelay, RelayBuilder, RelayReport};
pub use store::{ClaimedBatch, Failure, OutboxStore, OutboxWriter, Retry, Settlement};
