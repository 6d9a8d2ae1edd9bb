//! The BabelQueue transport contract, and nothing of the runtime.
//!
//! A transport moves bytes and reports facts; it never decides what happens to a message. It
//! hands each message out as a [`Delivery`] carrying what the broker said about it
//! ([`Facts`]: an out-of-band URN, the schema-version property, a delivery count
//! and how it relates to `attempts`, …); the runtime (`babelqueue-core`) classifies it, picks
//! a settle plan from its decision tables, and carries the plan out with the transport's
//! methods. Implement the four required methods, then list the capabilities your broker has:
//!
//! ```
//! use std::collections::VecDeque;
//! use std::sync::Mutex;
//! use std::time::Duration;
//!
//! use async_trait::async_trait;
//! use babelqueue_transport::{Capabilities, Delivery, Rewinder, Sends, Transport, TransportError};
//!
//! /// A toy transport: one FIFO per queue, in memory, nothing held in flight.
//! #[derive(Debug, Default)]
//! struct Fifo(Mutex<std::collections::HashMap<String, VecDeque<Vec<u8>>>>);
//!
//! #[async_trait]
//! impl Transport for Fifo {
//!     fn name(&self) -> &'static str {
//!         "fifo"
//!     }
//!     async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
//!         self.0.lock().unwrap().entry(queue.to_owned()).or_default().push_back(body.to_vec());
//!         Ok(())
//!     }
//!     async fn pop(&self, queue: &str, _timeout: Duration) -> Result<Option<Delivery>, TransportError> {
//!         let body = self.0.lock().unwrap().get_mut(queue).and_then(VecDeque::pop_front);
//!         Ok(body.map(|body| Delivery::new(queue, body)))
//!     }
//!     async fn ack(&self, _delivery: &Delivery) -> Result<(), TransportError> {
//!         Ok(()) // removed on pop
//!     }
//!     fn capabilities(&self) -> Capabilities<'_> {
//!         Capabilities::none().rewind(self)
//!     }
//! }
//!
//! #[async_trait]
//! impl Rewinder for Fifo {
//!     async fn rewind(&self, delivery: &Delivery) -> Result<(), TransportError> {
//!         self.publish(delivery.queue(), delivery.body()).await
//!     }
//! }
//!
//! let transport: Box<dyn Transport> = Box::new(Fifo::default());
//! assert!(transport.capabilities().rewinder().is_some());
//! // It declares no part beside the body (no headers, no delay …), so every write the runtime
//! // asks of it is a plain one, and the provided `Transport::send` hands it to `publish`. A
//! // broker that carries more declares it (`.sends(Sends::body_only().headers())`) and
//! // overrides `send` to carry those parts of an `Outgoing` request.
//! assert_eq!(transport.capabilities().send_parts(), Sends::body_only());
//! ```
//!
//!
//! # What is here
//!
//! * [`Transport`] and its optional capabilities ([`transport`]), gathered by
//!   [`Capabilities`];
//! * [`Delivery`], the [`Facts`] a broker reports about it, and its attempts [`Count`]
//!   ([`delivery`]);
//! * [`TransportError`] and its [`TransportErrorKind`]: the runtime decides retry and
//!   reconnect on the kind, never on the text; a transport's own error type converts into it
//!   by implementing [`BrokerError`];
//! * [`ReconnectBackoff`], the jittered pause between a transport's reconnect attempts
//!   ([`reconnect`]);
//! * what a broker says of a queue ([`Stats`], [`QueueStats`], in [`stats`]), for tools;
//! * URL option parsing ([`options`]) and secret redaction for logs and errors ([`redact`]).
//!
//! The runtime (`babelqueue-core`) depends on this crate and re-exports all of it under the
//! same names, so an application never names this crate; a transport crate needs only this
//! one, `babelqueue-envelope`, and `babelqueue-testkit` to prove itself. See
//! `docs/writing-a-transport.md` in the repository.

pub mod delivery;
mod error;
pub mod options;
pub mod outgoing;
pub mod reconnect;
pub mod redact;
pub mod stats;
pub mod transport;

pub use delivery::{Count, Declared, Delivery, Facts, Headers};
pub use error::{BrokerError, TransportError, TransportErrorKind};
pub use outgoing::{Outgoing, Sends};
pub use reconnect::ReconnectBackoff;
pub use stats::{QueueStats, Stats};
pub use transport::{
    Abandoner, BatchAcker, BatchPopper, BatchPublisher, BrokerView, Browser, Capabilities,
    DeadLetterNamer, DeadLetterWriter, HoldChecker, Inspector, NativeSettler, Redeliver,
    Redelivered, Redeliverer, Redelivery, Rewinder, Taker, Transport,
};
