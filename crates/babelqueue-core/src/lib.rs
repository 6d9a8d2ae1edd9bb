//! The BabelQueue runtime.
//!
//! An [`App`] publishes envelopes and consumes them: each delivery is classified (poison,
//! version-gated, readable), routed by its URN to a [`Handler`], and settled according to the
//! decision tables: acknowledged, retried with back-off, dead-lettered with the right record,
//! left to the broker, or left unsettled to come back. A [`Transport`] moves the bytes;
//! [`MemoryTransport`] is the in-process one, and each broker has its own crate.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::Error> {
//! use std::time::Duration;
//! use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport};
//!
//! let memory = MemoryTransport::new();
//! let app = App::builder(memory.clone())
//!     .queue("orders")
//!     .max_attempts(2)
//!     .dead_letter(true)
//!     .handle("urn:babel:orders:created", |_ctx: Context| async {
//!         Err::<(), _>(HandlerError::new("payment service down"))
//!     })
//!     .build()?;
//!
//! app.publish("urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
//! app.consume(Consume::new().max_messages(2).handle_signals(false)).await?;
//!
//! // Two deliveries failed; the second went to the dead-letter queue with its reason.
//! let record = String::from_utf8(memory.bodies("orders.dlq").remove(0)).unwrap();
//! assert!(record.contains(r#""reason":"failed","error":"payment service down""#));
//! # Ok(()) }
//! ```
//!
//! # Where the rules live
//!
//! A message goes transport → facts → pure decision → plan → settle:
//!
//! * [`transport`]: the broker contract and its optional capabilities; a transport hands out a
//!   [`Delivery`] carrying the [`Facts`] its broker reported, and decides nothing;
//! * `classify` (internal): the first decision, pure: the schema-version gate, poison (with its
//!   typed cause and count), or a readable envelope with its reconciled `attempts` and its route;
//! * `decide` (internal): every retry, poison, unknown-URN and schema-version-gate rule, as
//!   pure functions from what was classified to a settle plan;
//! * [`app`]: runs handlers (up to `concurrency` at once), carries out plans through the
//!   transport's capabilities, shuts down gracefully.
//!
//! # Deliberate differences from the reference SDK
//!
//! * A failed dead-letter write never stops the worker: the delivery is left unsettled
//!   (rewound where the broker can) and comes back, for every record kind.
//! * `concurrency` runs several handlers at once per consume loop.
//! * `null`/missing `attempts` count as 0 on the retry path; a non-finite back-off saturates.
//! * An empty `dead_letter_suffix` (DLQ = source queue) is refused at build time.
//! * Redrive restores the whole drained batch when a publish fails, and never publishes to an
//!   empty target.

pub mod app;
// The rules below are the runtime's own, not its API: public only for the conformance
// runner, the fuzz targets and the testkit (`babelqueue_testkit::reading`), and hidden.
#[doc(hidden)]
pub mod attempts;
#[doc(hidden)]
pub mod classify;
#[doc(hidden)]
pub mod decide;
mod error;
mod failure;
pub mod gate;
pub mod handler;
pub mod idempotency;
pub mod memory;
pub mod policy;
pub mod redrive;
pub mod schema;
pub mod send;
pub mod settings;
pub mod transport;

pub use babelqueue_transport::{delivery, options, outgoing, reconnect, redact, stats};

pub use app::{App, AppBuilder, Consume, Event, Observer, Outcome, SpanHook, StopHandle, Summary};
pub use babelqueue_envelope as envelope;
pub use babelqueue_envelope::{Envelope, Message, RawJson};
pub use decide::dead_letter_queue;
pub use delivery::{Count, Declared, Delivery, Facts, Headers};
pub use error::{BrokerError, Error, ErrorKind, Result, TransportError, TransportErrorKind};
pub use failure::{Action, HandlerError};
pub use handler::{Context, HEADER_REPLAY_BYPASS, Handler, HandlerFuture, typed};
pub use memory::MemoryTransport;
pub use policy::{Backoff, Jitter, Policy, UnknownUrn};
pub use reconnect::ReconnectBackoff;
pub use settings::Settings;
pub use stats::{QueueStats, Stats};
pub use transport::{
    Abandoner, BatchAcker, BatchPopper, BatchPublisher, BrokerView, Browser, Capabilities,
    DeadLetterNamer, DeadLetterWriter, HoldChecker, Inspector, NativeSettler, Outgoing, Redeliver,
    Redelivered, Redeliverer, Redelivery, Rewinder, Sends, Taker, Transport,
};

/// Merges header maps: empty keys and empty values are dropped, later maps win.
pub fn merge_headers<'a>(sources: impl IntoIterator<Item = &'a Headers>) -> Headers {
    let mut out = Headers::new();
    for source in sources {
        for (k, v) in source {
            if !k.is_empty() && !v.is_empty() {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}
