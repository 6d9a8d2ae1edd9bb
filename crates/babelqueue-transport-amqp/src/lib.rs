//! RabbitMQ (AMQP 0-9-1) for BabelQueue, on [lapin](https://docs.rs/lapin).
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{App, Consume, Context, HandlerError};
//! use babelqueue_transport_amqp::AmqpTransport;
//!
//! let transport = AmqpTransport::connect("amqp://guest:guest@127.0.0.1:5672/%2f").await?;
//! let app = App::builder(transport)
//!     .queue("orders")
//!     .max_attempts(3)
//!     .dead_letter(true)
//!     .concurrency(4) // the basic_qos prefetch follows it
//!     .handle("urn:babel:orders:created", |ctx: Context| async move {
//!         let order: serde_json::Value = ctx.data_as()?;
//!         tracing::info!(order = %order["order_id"], "order created");
//!         Ok::<(), HandlerError>(())
//!     })
//!     .build()?;
//! app.publish("urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
//! app.run().await?; // until SIGTERM / SIGINT
//! # Ok(()) }
//! ```
//!
//! Messages are shared with every other BabelQueue SDK on the same queues: the Python
//! (`pika`), Go (`amqp091-go`) and PHP workers read what this crate writes and the other way
//! round, byte for byte.
//!
//! # URL
//!
//! `amqp://user:pass@host:5672/vhost?heartbeat=30&connection_timeout=5000&prefetch=8`
//! (`amqps://` for TLS through rustls with the aws-lc-rs provider and the platform's roots; a
//! private CA is the URL query key `ca_file=/path/ca.pem` or [`AmqpOptions::ca_file`], a client
//! certificate for mutual TLS `cert_file=` and `key_file=` or [`AmqpOptions::client_certificate`]).
//!
//! * hosts: one, or a cluster's several, `amqp://user:pass@h1:5672,h2:5673/vhost` and/or
//!   `?host=h3:5674` (repeatable); the connection goes to the first that answers, in order, and
//!   after a connection ends the next one starts with the host after it (see [`LapinClient`]).
//! * vhost: an absent, empty or `/` path is the vhost `/` (as pika reads it), `%2f` is `/`,
//!   anything else is percent-decoded ([`AmqpUrl`]).
//! * `heartbeat` (seconds), `connection_timeout` (milliseconds, default 10 000), `frame_max`,
//!   `channel_max`, `auth_mechanism`: passed to lapin.
//! * `prefetch=N`: a fixed `basic_qos` prefetch. Without it the prefetch follows the runtime's
//!   `concurrency` (see below).
//! * `declare=0`: do not declare queues (they are provisioned elsewhere).
//! * `queue_type=classic|quorum` (default `classic`): the type of the queues declared, and of
//!   the queues consumed ([`topology`]).
//! * Anything else (pika-only options) is ignored with a warning.
//!
//! # Wire format
//!
//! * Topology: publish to the default exchange with routing key = queue name. `<queue>` and
//!   `<queue>.dlq` are declared lazily, once per connection: durable, not exclusive, not
//!   auto-delete, with the arguments of `queue_type` only: **none** for classic queues (the
//!   default), exactly as the other SDKs declare them, so they can share them;
//!   `x-queue-type=quorum` and `x-delivery-limit=2147483647` for quorum queues
//!   ([`topology`]). A queue of another type fails with [`AmqpError::QueueTypeMismatch`] (a
//!   configuration error naming the queue, its type and the option), one with other arguments
//!   (a dead-letter exchange, a TTL) with [`AmqpError::DeclareMismatch`]; the publishing channel
//!   is reopened.
//! * Body: the envelope, byte for byte. Properties and headers: [`projection::properties`]
//!   (`type` = URN, `correlation_id` = `trace_id`, `message_id` = `meta.id`, `app_id`
//!   `babelqueue`, `content_type` `application/json`, persistent, and the native-typed headers
//!   `x-schema-version`, `x-source-lang`, `x-attempts`, plus `traceparent` when given).
//! * Consume: `basic.consume` with manual acknowledgement on a channel per queue; the handler
//!   sees the header table as text ([`projection::received_headers`]); `attempts` is read
//!   from the body by the runtime (`x-attempts` is a produce-side mirror).
//!
//! # Capabilities
//!
//! | capability | |
//! |---|---|
//! | `Sends::headers` | `traceparent` and other out-of-band headers in the AMQP header table |
//! | `Sends::confirmed` | every send, so every retry copy, dead-letter record and shutdown copy, waits for its **publisher confirm** before the original is acknowledged |
//! | `Rewinder` | a delivery left unsettled (its dead-letter write failed) is `basic.nack`ed with requeue, then the runtime pauses 1 s |
//! | `Inspector` | what RabbitMQ said of a delivery, for tools: the `message_id` property as its id, the `redelivered` flag, the delivery tag, exchange, routing key and the basic properties that are set (kept raw in the delivery's handle, formatted only when asked) |
//!
//! No `Redeliverer` (a retry is a confirmed copy plus an ack, the back-off delay is not
//! applied), no delayed send (RabbitMQ has no native delay without a plugin), no
//! schema-version gate (the binding has none), no `Browser`.
//!
//! # Prefetch and concurrency
//!
//! `App::consume` holds 4 deliveries per handler slot on RabbitMQ (the transport's
//! `Capabilities::prefetch_per_slot`), announces that through `prepare_consume`, and the
//! consumer channel's prefetch (`basic_qos`, channel-wide) starts there: at concurrency 8, 32
//! deliveries are on the wire or waiting in the runtime for a slot, so the consumer never idles
//! for a round trip after a batch. On the local broker that took consume + ack at concurrency
//! 8 from about 11 000 to 17 000-18 000 messages/s. The cost: deliveries waiting for a slot are
//! held away from the queue's other consumers (they go back unchanged at a stop, or when the
//! channel closes). `App::builder(..).prefetch(concurrency)` holds only what runs.
//!
//! Without that announcement (a bare `pop` loop) the prefetch starts at 1 and is raised
//! whenever another message is asked for while every delivery held is still unsettled.
//! `prefetch=N` in the URL or [`AmqpOptions::prefetch`] fixes the `basic_qos` prefetch
//! instead. A prefetch known before the first delivery (announced or fixed) is the
//! consumer's own (`global=false`, which quorum queues need); only the growing one is
//! channel-wide.
//!
//! # Reconnect supervision
//!
//! lapin 4.12 ships an opt-in `enable_auto_recover`; this crate does not use it, and
//! supervises the connection itself (see [`transport`] for the details): when the connection
//! or a channel drops (a broker restart, `rabbitmqctl stop_app`), the next operation
//! reconnects with exponential back-off (100 ms doubling to 5 s, with jitter), declares its
//! queues again and re-subscribes. Unacknowledged deliveries are requeued by RabbitMQ when
//! their channel closes; their old delivery tags are never sent on the new connection (their
//! ack reports [`AmqpError::StaleDelivery`] and the message is handled again: at least once,
//! never lost). With several hosts, the new connection goes to the next node that answers. A
//! publish whose confirm died with its connection is sent again on the new one (a duplicate
//! at worst), within [`AmqpOptions::reconnect_wait`]. One a quorum queue refuses (a negative
//! confirm: no leader for a moment) is sent again on a new channel for up to 2 s
//! ([`topology::REFUSAL_RESEND_WINDOW`]); a classic queue's refusal (full, with
//! `x-overflow=reject-publish`) fails at once. A publish returns `Ok` only once confirmed.
//!
//! # Deviations from the reference (Python `pika_transport.py`, babelqueue 1.24.0)
//!
//! * Publisher confirms: the reference publishes without them, so a retry copy or dead-letter
//!   record could be lost if the broker failed right after the original was acknowledged. Here
//!   every publish waits for RabbitMQ's confirm, and is `mandatory` (an unroutable message is
//!   an error, not silently dropped).
//! * Consuming uses `basic.consume` with a prefetch of 4 deliveries per handler slot instead
//!   of polling `basic.get`.
//! * A delivery left unsettled is requeued at once (`Rewinder`), where the reference keeps it
//!   until its channel closes.
//! * A body that is not an envelope still gets `content_encoding` and `app_id` (like Go); the
//!   reference sends only `content_type` and `delivery_mode`.
//! * `type` is the body's URN (`job`, or the legacy `urn` alias when `job` is not a valid
//!   string); the reference copies `job` whatever it holds.
//! * A `type`, `correlation_id` or `message_id` over 255 bytes is a clear error
//!   ([`AmqpError::PropertyTooLong`]); nothing is truncated.
//! * Header values of a received message are surfaced as text like the reference (booleans as
//!   `True`/`False`), but nested tables, arrays and decimals are left out.
//! * Reconnection, with the stale-delivery rule above: the reference reconnects lazily on
//!   the next call but has no back-off and no re-subscription (it polls).

//!
//! # Limits
//!
//! * No delay: the retry back-off is not applied and `publish_delayed` is refused (RabbitMQ
//!   has no per-message delay without a plugin).
//! * A retry copy carries the contract properties only: out-of-band headers such as
//!   `traceparent` are not copied (as in every SDK).
//! * A bare `pop` loop's adaptive prefetch is channel-wide (`global=true`, one consumer per
//!   channel), which quorum queues refuse; `App::consume`, a fixed `prefetch=N` and
//!   `queue_type=quorum` give the consumer a prefetch of its own instead (a bare `pop` loop on
//!   `queue_type=quorum` starts at [`topology::QUORUM_POP_PREFETCH`] and does not grow).
//! * `amqps://` goes through lapin's rustls (aws-lc-rs, platform verifier, plus the CA file
//!   `ca_file` if any; a client certificate with `cert_file` + `key_file`). Authenticating
//!   with the certificate alone needs RabbitMQ's `rabbitmq_auth_mechanism_ssl` plugin and
//!   `auth_mechanism=external` in the URL.
//! * No `Browser`: `babelqueue dlq list` is not available on `amqp://`.

mod acks;
mod client;
#[cfg(test)]
mod cluster_tests;
mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod inspect;
mod management;
// Public for the conformance runner and the fuzz targets, which check the wire mapping
// directly; it is not part of the API an application should build on.
#[doc(hidden)]
pub mod projection;
mod stats;
mod tls;
pub mod topology;
pub mod transport;
mod url;

pub use client::{
    AmqpClient, AmqpLink, AmqpSettle, AmqpSubscription, Incoming, LapinClient, QueueCount,
};
pub use error::AmqpError;
pub use topology::QueueType;
pub use transport::{AmqpOptions, AmqpTransport, DEFAULT_OPERATION_TIMEOUT, MANAGEMENT_URL_ENV};
pub use url::{AmqpHost, AmqpUrl, DEFAULT_HEARTBEAT};
