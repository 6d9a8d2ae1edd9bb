//! The Apache ActiveMQ Artemis transport of BabelQueue: AMQP 1.0 over
//! [`fe2o3-amqp`](fe2o3_amqp), interoperable with the other BabelQueue SDKs and with JMS peers.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{App, Consume, Context, HandlerError};
//! use babelqueue_transport_artemis::ArtemisTransport;
//!
//! let transport = ArtemisTransport::connect("artemis://bq:bq@127.0.0.1:5673").await?;
//! let app = App::builder(transport)
//!     .queue("orders")
//!     .dead_letter(true)
//!     .concurrency(4) // the receiver's link credit follows it
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
//! # URL
//!
//! `artemis://[user:password@]host[:port][?option=value&…]`, or `artemis+ssl://…` for TLS. They
//! are spoken as `amqp://` and `amqps://` (the reference SDK's rewrite); the default ports are
//! 5672 and 5671. With a user, SASL PLAIN is used (user and password are percent-decoded);
//! without one, SASL ANONYMOUS. Options:
//!
//! | option | default | meaning |
//! |---|---|---|
//! | `credit` | 1 | the smallest receiver link credit; see *Link credit* below |
//! | `receive_timeout_ms` | 1000 | how long a `pop` waits when the runtime passes a zero timeout |
//! | `reconnect_timeout_ms` | 30000 | how long a publish keeps reconnecting before it fails |
//! | `send_credit_timeout_ms` | 2000 | how long a send waits for link credit before it fails as [`AddressBlocked`](ArtemisError::AddressBlocked); see *A full address* below |
//! | `queue_capability` | true | ask for ANYCAST (point-to-point) addresses with the AMQP `queue` capability |
//! | `ca` | none | a PEM file of extra trust anchors for `artemis+ssl://` (the webpki roots are always trusted) |
//!
//! An unknown option is refused. TLS uses rustls with the aws-lc-rs provider.
//!
//! # Addressing
//!
//! One sender and one receiver link per queue; the AMQP address is the plain queue name, and the
//! dead-letter queue is the address `<queue>.dlq`. With `queue_capability` (the default) every
//! link carries the `queue` capability, so an address Artemis auto-creates is ANYCAST and keeps
//! messages sent before any consumer attached. Artemis' own dead-letter address (`DLQ`,
//! `max-delivery-attempts` 10 in the stock `broker.xml`) is separate from BabelQueue's
//! `<queue>.dlq`.
//!
//! # What goes on the wire
//!
//! See [`projection`]: the envelope, byte for byte, as one amqp-value string (a JMS peer sees a
//! `TextMessage`), the URN as the `x-opt-jms-type` message annotation (a symbol key; JMSType),
//! `trace_id` as `correlation-id`, `meta.created_at` as `creation-time`, and the string
//! application properties `bq_schema_version`, `bq_source_lang`, `bq_attempts` and
//! `bq_app_id` = `babelqueue` (underscores: JMS property names are Java identifiers).
//!
//! On consume, the body is handed to the runtime exactly as carried, with what the broker said
//! about it: the `bq_schema_version` property as carried, which the runtime's gate reads before
//! the body is decoded (the string `"1"` or any integer 1 passes; absent, null or ASCII-blank
//! means "no version"; anything else is version-gated: never decoded, handled or retried), and
//! the AMQP `delivery-count` as a [`Count::Redelivered`](babelqueue_core::Count::Redelivered):
//! the runtime makes `attempts` `max(body attempts, delivery-count)` (the count is 0-based, so
//! there is no −1) and counts a poison body by it.
//!
//! # Capabilities
//!
//! | runtime capability | here |
//! |---|---|
//! | [`Rewinder`](babelqueue_core::Rewinder) | a delivery whose dead-letter or retry write failed is moved behind the others (an unchanged copy to the end of its queue, then the original accepted; `released` when the copy cannot be sent); one that shutdown interrupts is `released`: neither stays unsettled until the link closes |
//! | redelivery | the runtime's copy ([`Redelivery::Copy`](babelqueue_core::Redelivery::Copy)): a retry or release publishes the copy (attempts counted) to the same address, scheduled by Artemis after the back-off through the delayed publisher, then accepts the original |
//! | [`Sends::delay`](babelqueue_core::Sends::delay) | `x-opt-delivery-delay` |
//! | dead-letter | the record is published to `<queue>.dlq`, then the original is accepted |
//! | [`Sends::headers`](babelqueue_core::Sends::headers) | an extension: out-of-band headers (`traceparent`) ride as string application properties, and non-`bq_` string application properties come back as the delivery's headers; a retry copy does not carry them |
//! | [`Browser`](babelqueue_core::Browser) (`babelqueue dlq list`) | a browsing link (the `copy` distribution mode, pre-settled): the head of the queue in order, nothing taken or counted; see [`browse`] |
//! | [`Inspector`](babelqueue_core::Inspector) (tools that show the wire) | the `message-id` property as a delivery's id, `delivery-count` above 0 as redelivered, the header, the properties that are set and the message annotations (`x-opt-*`), kept in the delivery's handle from the received message and formatted only when asked |
//! | native settle, routed publish | no (as the reference) |
//!
//! # Link credit
//!
//! Receiver links use manual credit. The window (the most deliveries Artemis may have out to
//! this consumer at once: held by handlers, buffered, or on the way) starts at `credit` (1) and
//! grows to the runtime's `concurrency` on its own: the runtime only asks for a delivery when a
//! handler slot is free, so a request while *n* deliveries are unsettled proves it runs *n + 1*
//! at once (see [`CreditWindow`]). At each request the credit is set to the room left in the
//! window; nothing is prefetched beyond it, so another worker on the same queue gets every other
//! message. Raise `credit` to prefetch more (at concurrency 1, `credit=2` keeps the next message
//! on its way while the handler runs).
//!
//! # A full address
//!
//! When an address is full (`max-size-bytes` reached under the `BLOCK` or `FAIL`
//! address-full-policy), Artemis gives a sender link attached to it no credit, and a send on it
//! would wait for ever. (A link that still holds credit from before gets its sends rejected
//! under `FAIL`: [`ArtemisError::NotAccepted`].) So a send waits for credit at most
//! `send_credit_timeout_ms` (2 s) and then
//! fails with [`ArtemisError::AddressBlocked`], which names the address: transient, of kind
//! [`TransportErrorKind::Timeout`](babelqueue_core::TransportErrorKind::Timeout).
//!
//! * Nothing was transferred, and that message never will be: the client gives up before the
//!   transfer exists, and a credit Artemis grants later carries a later send's own message.
//!   The link that got no credit for the whole bound is detached; the next send attaches a
//!   fresh one.
//! * The connection is not at fault: it is not replaced, and the deliveries it holds stay
//!   unsettled with it. Receiving and settling go on meanwhile (a waiting send holds only its
//!   own address's sender link).
//! * Once a send to an address found no credit, later sends to it on the same connection wait
//!   only 250 ms until one gets through: Artemis grants credit to an attached link within
//!   milliseconds of the address having room again (a raised limit or a consumed message).
//! * The client does not retry it (a publish is retried only across connection failures); the
//!   caller decides. For a dead-letter or retry write the runtime leaves the message unsettled
//!   and moves it behind the others ([`Rewinder`](babelqueue_core::Rewinder)), so at
//!   concurrency 1 the good messages behind it keep flowing while the dead-letter address is
//!   full, and the message is dead-lettered once, when there is room again.
//!
//! A message that was transferred but got no outcome within 30 s is a different case: the
//! connection is then taken as broken and replaced (see below).
//!
//! # Reconnecting
//!
//! [`AmqpClient`] supervises its connection: a dropped connection (a broker restart, a network
//! cut) is replaced on the next operation. Deliveries the old connection held unsettled go back
//! to their queue and are delivered again; a worker keeps polling through the outage; a publish
//! retries for up to `reconnect_timeout_ms`. Delivery is at least once: a message is never
//! lost, and may be handled twice.
//!
//! # Performance
//!
//! Measured on a shared 2-vCPU VM against Artemis 2.40.0 on loopback (`benches/artemis.rs`,
//! median of 3 runs of 2000 messages): the worker at concurrency 1 handled about 11 700
//! messages/s (15 000 at concurrency 8) where the Python SDK 1.24.0 worker handled about 2 200;
//! publishing one message at a time (each accepted by the broker) ran at about 10 000/s against
//! 1 600/s. See `docs/transports/artemis.md` for the ranges under load.
//!
//! # Deviations from the reference SDK (Python 1.24.0)
//!
//! * Messages are sent durable (`header.durable = true`, JMS `PERSISTENT`); the reference leaves
//!   the header unset (non-durable). This keeps messages across a broker restart.
//! * Delays are honoured with Artemis scheduled delivery (the retry back-off, the `release`
//!   strategy's delay, delayed publishes); the reference re-publishes at once.
//! * A failed dead-letter or retry write (a full dead-letter address included) moves the
//!   delivery behind the others instead of leaving it unsettled until the link closes.
//! * Credit follows `concurrency` (the reference uses a fixed credit of 1 and runs one handler).
//! * Links ask for the `queue` capability (ANYCAST); the reference attaches without
//!   capabilities and relies on the broker's default routing type.
//! * A non-integer `attempts` omits `bq_attempts` instead of failing the publish.
//! * The `x-opt-jms-type` annotation carries the URN the runtime routes on (`job`, or the
//!   `urn` alias), not only a `job` member.
//! * A body that is not valid UTF-8 (only ever a raw dead-letter copy of such a body) is sent as
//!   a data section, byte for byte; the reference cannot produce one.
//! * Out-of-band headers (`traceparent`) are carried as string application properties; the
//!   reference carries none (a reference consumer ignores them).
//!
//! # Limits
//!
//! * A publish retried after a connection loss may store the message twice.
//! * `ack` sends a settled `accepted` disposition that the broker does not confirm. Call
//!   [`Transport::close`](babelqueue_core::Transport::close) before the process exits, or the
//!   last disposition can be lost with the process and Artemis delivers that message again.
//! * The core [`Transport`](babelqueue_core::Transport) trait has no hook that tells a transport
//!   the runtime's `concurrency`, so the window learns it from the runtime's requests; it
//!   reaches `concurrency` once that many handlers ran at once.
//! * Artemis raises `delivery-count` for `modified{delivery-failed}` only; `released` and a clean
//!   close do not, and a consumer that crashed raises it only sometimes. BabelQueue's own
//!   retries count in the body, so this only affects how soon a crash-looping message is
//!   noticed.

pub mod amqp;
#[cfg(test)]
mod batch_tests;
pub mod browse;
pub mod client;
pub mod config;
pub mod credit;
mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod inspect;
// Public for the conformance runner and the fuzz targets, which check the wire mapping
// directly; it is not part of the API an application should build on.
#[doc(hidden)]
pub mod projection;
mod stats;
mod transport;

pub use amqp::AmqpClient;
pub use client::{Client, DeliveryToken, Disposition, ManagementReply, Received};
#[allow(deprecated)]
pub use config::ArtemisConfig;
pub use config::ArtemisOptions;
pub use credit::CreditWindow;
pub use error::ArtemisError;
pub use transport::ArtemisTransport;

/// The AMQP 1.0 types of `fe2o3-amqp` this crate's API uses (messages, properties, values).
pub use fe2o3_amqp::types as amqp_types;
