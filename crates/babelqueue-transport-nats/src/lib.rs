//! BabelQueue transport for NATS JetStream, on `async-nats`.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{App, Consume, Context, HandlerError};
//! use babelqueue_transport_nats::NatsTransport;
//!
//! // `scripts/brokers.sh up nats` starts one: nats-server --jetstream on 127.0.0.1:4222.
//! let transport = NatsTransport::connect("nats://127.0.0.1:4222?ack_wait=30").await?;
//! let app = App::builder(transport)
//!     .queue("orders")
//!     .max_attempts(3)
//!     .dead_letter(true) // records go to the queue `orders.dlq`, a stream of its own
//!     .handle("urn:babel:orders:created", |ctx: Context| async move {
//!         println!("order {} (attempt {})", ctx.data(), ctx.attempts());
//!         Ok::<(), HandlerError>(())
//!     })
//!     .build()?;
//! app.publish("urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
//! app.consume(Consume::new().max_messages(1).handle_signals(false)).await?;
//! # Ok(()) }
//! ```
//!
//! This crate is written the way a transport outside this repository would be: it uses only
//! the public API of `babelqueue-core` and `babelqueue-envelope`.
//!
//! # What maps to what
//!
//! | BabelQueue | JetStream |
//! |---|---|
//! | a queue `q` | a stream `<stream_prefix><token(q)>` (work-queue retention: a message is removed when acknowledged) holding the one subject `<subject_prefix>.<token(q)>`; created on first use |
//! | the queue name in a stream name or subject | `projection::token`: ASCII letters, digits and `-` as they are, `_` as `__`, any other byte as `_XX` (`orders.dlq` → `orders_2Edlq`), so every queue name is valid and names one stream |
//! | `publish` | a JetStream publish, body byte for byte, waiting for the stream's acknowledgement |
//! | `publish_batch` ([`BatchPublisher`](babelqueue_transport::BatchPublisher)) | up to 256 JetStream publishes in flight, every one waiting for the stream's acknowledgement |
//! | publish with headers ([`Sends::headers`](babelqueue_transport::Sends::headers)) | the same with NATS headers |
//! | `pop` | one pull request for one message on the stream's durable pull consumer (`consumer=`, explicit acks, `AckWait` = `ack_wait`, no `MaxDeliver`) |
//! | the facts of a delivery | `num_delivered − 1` as [`Count::Redelivered`](babelqueue_transport::Count::Redelivered), the `bq-schema-version` header as the declared version, every header but JetStream's `Nats-*` as a header |
//! | `receive` (several at once) | the first as `pop` takes it, then one no-wait pull (`fetch`) for what the consumer has at hand, up to the room the consume loop has: 4 per handler slot by default ([`Capabilities::prefetch_per_slot`](babelqueue_transport::Capabilities::prefetch_per_slot)); one that waited for a slot past `ack_wait` is not started ([`HoldChecker`](babelqueue_transport::HoldChecker)) |
//! | `ack` | `+ACK`, confirmed by the server; a batch's `+ACK`s sent together ([`BatchAcker`](babelqueue_transport::BatchAcker)) |
//! | retry, release ([`Redeliverer`](babelqueue_transport::Redeliverer), native) | `-NAK` with the back-off as its delay: the original comes back, bytes and headers unchanged, its count one higher ([`keeps_original`](babelqueue_transport::Redeliverer::keeps_original)); when that count would not give the `attempts` the runtime counted (a body ahead of the count), the runtime does not ask for the NAK: it publishes its body with the headers and acknowledges the original |
//! | rewind ([`Rewinder`](babelqueue_transport::Rewinder)) | `-NAK` (back first); `rewind_behind`: a copy at the tail (headers kept, the attempts JetStream counted carried in the body), then `+ACK` |
//! | an unsettled delivery | back after `ack_wait` (a consumer that went away, a handler still running) |
//! | dead-letter | the record published to the dead-letter queue (`<queue>.dlq`: its own stream), then `+ACK` |
//! | a copy on behalf of a delivery with a schema-version header ([`Sends::facts`](babelqueue_transport::Sends::facts)) | published with that header as carried (a gated message's raw bytes stay gated in the dead-letter queue) |
//! | `babelqueue dlq list` ([`Browser`](babelqueue_transport::Browser)) | the stream's messages read by sequence, no consumer |
//! | what the broker said of a delivery ([`Inspector`](babelqueue_transport::Inspector), for tools) | the stream sequence as its id, `num_delivered > 1` as redelivered; the stream, consumer, consumer sequence, delivery count, pending count and publish time (epoch nanoseconds) from the delivery's ack subject |
//!
//! # Clusters
//!
//! A URL may name every server of a cluster, `nats://h1:4222,h2:4223,h3:4224?replicas=3`: the
//! client connects to one that answers and reconnects to another when it goes away, and
//! `replicas=3` keeps each stream on three servers, so a publish confirmed before a server dies
//! is not lost. Across a stream leader's death a worker keeps pulling: a pull lost with the
//! connection ends at once, and the answers of a cluster electing a new leader (`503`, `409
//! Leadership Change`) are transient errors. An existing stream with fewer replicas than asked
//! is refused ([`NatsTransport::ensure_stream`]).
//!
//! The transport reports facts and decides nothing: the runtime applies the schema-version
//! gate, classifies poison, reconciles `attempts` with the count and picks the settlement.
//!
//! # Errors
//!
//! One enum, [`NatsError`], whose [`kind`](NatsError::kind) is the runtime's
//! [`TransportErrorKind`](babelqueue_transport::TransportErrorKind); credentials the server refuses
//! are [`NatsError::Auth`] (the host named, never the password), a server without JetStream is
//! a configuration error.

pub mod error;
mod inspect;
// Public for tests and tools that check the wire mapping directly; it is not part of the API
// an application should build on (the options it holds are re-exported below).
#[doc(hidden)]
pub mod projection;
mod publish_batch;
mod receive;
mod servers;
mod stats;
mod transport;

pub use async_nats;
pub use error::NatsError;
pub use projection::{DEFAULT_PING_INTERVAL, NatsOptions, Storage};
pub use transport::NatsTransport;
