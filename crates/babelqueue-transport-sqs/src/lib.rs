//! Amazon SQS for BabelQueue, on `aws-sdk-sqs`.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{App, Consume, Context, HandlerError};
//! use babelqueue_transport_sqs::SqsTransport;
//!
//! // Credentials come from the default AWS chain (here: AWS_ACCESS_KEY_ID / _SECRET_ACCESS_KEY).
//! let transport = SqsTransport::connect("sqs://us-east-1?endpoint=http://127.0.0.1:5000").await?;
//! let app = App::builder(transport)
//!     .queue("orders")
//!     .concurrency(4) // one ReceiveMessage takes up to 4 messages for the 4 handler slots
//!     .max_attempts(5)
//!     .dead_letter(true) // exhausted and poison messages go to `orders-dlq`
//!     .retry_backoff(std::time::Duration::from_secs(10)) // ChangeMessageVisibility(10)
//!     .handle("urn:babel:orders:created", |ctx: Context| async move {
//!         println!("order {}", ctx.data());
//!         Ok::<(), HandlerError>(())
//!     })
//!     .build()?;
//! app.publish("urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
//! app.run().await?; // until SIGTERM / SIGINT
//! # Ok(()) }
//! ```
//!
//! The body of every SQS message is the canonical envelope, byte for byte. The transport adds
//! a routable view of it as message attributes, releases with the visibility timeout, and
//! reports what SQS says beside each body it receives (the `bq-schema-version` attribute, the
//! receive count). It decides nothing: the runtime applies the schema-version gate, reconciles
//! `attempts`, classifies poison and takes every retry, poison,
//! unknown-URN and gate decision; this crate carries them out on
//! SQS.
//!
//! # URL
//!
//! `sqs://[region][?endpoint=URL&prefix=URL&fifo=1&group_id=ID&wait_time=N&visibility_timeout=N&content_dedup=1&max_messages=N]`
//!
//! | option | meaning | default |
//! |---|---|---|
//! | region (the host) | the AWS region | the provider chain (`AWS_REGION`, profile) |
//! | `endpoint` | a custom endpoint (moto, LocalStack, ElasticMQ) | AWS |
//! | `prefix` | queue URL = `<prefix>/<name>`, no `GetQueueUrl` | `GetQueueUrl`, cached per name |
//! | `fifo` | FIFO sends: `MessageGroupId`, `MessageDeduplicationId` | off (a `*.fifo` name is FIFO anyway) |
//! | `group_id` | the FIFO `MessageGroupId` | the target queue's name |
//! | `wait_time` | cap of the long poll, 0..=20 s | the runtime's poll timeout (1 s), max 20 |
//! | `visibility_timeout` | `VisibilityTimeout` on ReceiveMessage, 0..=43200 | the queue's |
//! | `content_dedup` | FIFO: rely on content-based deduplication | off |
//! | `max_messages` | a fixed number of messages per ReceiveMessage, 1..=10 | the runtime's `concurrency` |
//!
//! Booleans accept `1`, `true`, `yes`, `on`. Credentials always come from the default AWS
//! provider chain: environment, shared profile (static keys, assumed roles), web identity, ECS
//! and EC2 instance metadata. `aws-config` is built without its `sso` and `credentials-process`
//! features, so SSO profiles and `credential_process` entries are not read; build an
//! [`AwsSqs`] over your own `aws_sdk_sqs::Client` for those. An unknown option or an
//! out-of-range number is an error. Queue URLs are resolved once per name for the transport's
//! life.
//!
//! # What goes on the wire
//!
//! * **Produce**: `SendMessage` with the body unchanged and the contract attributes
//!   ([`projection::attributes`]): `bq-job`, `bq-trace-id`, `bq-message-id`, `bq-source-lang`
//!   (String) and `bq-schema-version`, `bq-created-at` (Number). Out-of-band headers (a W3C
//!   `traceparent`, `bq-replay-bypass` …) are added as String attributes in key order; the
//!   contract attributes win a collision and SQS's cap of 10 attributes cuts the rest.
//! * **Delayed publish**: `DelaySeconds` in whole seconds, 0..=900. More, a fraction, or any
//!   delay on a FIFO queue is an [`SqsError::Delay`] and nothing is sent.
//! * **Consume**: `ReceiveMessage` with all message attributes, the `ApproximateReceiveCount`
//!   system attribute, `WaitTimeSeconds` = the poll timeout (truncated, ≤ 20, ≤ `wait_time`).
//!   The body is handed over exactly as received, with two facts
//!   ([`babelqueue_core::Facts`]): the `bq-schema-version` attribute's text as carried
//!   ([`projection::declared`]), and `ApproximateReceiveCount − 1` when the count is above 1
//!   ([`projection::count`], a [`Count::Redelivered`](babelqueue_core::Count::Redelivered)).
//!   The runtime's gate reads the first before anything decodes the body: a declared version
//!   other than `1` (not blank, compared untrimmed) is never decoded, reconciled or handled.
//!   Otherwise the runtime makes `attempts` `max(body, ApproximateReceiveCount − 1)`, the body
//!   re-encoded only when that raises it, and reports the count as
//!   [`Context::native_attempts`](babelqueue_core::Context::native_attempts). Every attribute
//!   with a text value is a header.
//! * **Ack**: `DeleteMessage`.
//! * **Retry, unknown-URN release, shutdown release**: `ChangeMessageVisibility` with the delay
//!   (0 when none is configured; truncated, clamped to 0..=43200 s with a warning). Never a delete and re-send: SQS's
//!   receive count is the attempt counter, and attributes (the `traceparent` included) survive.
//!   A shutdown release therefore also counts as a delivery.
//! * **Dead-letter**: `SendMessage` of the record to `<queue>-dlq` (FIFO: `<base>-dlq.fifo`;
//!   `dead_letter_suffix` replaces `-dlq`; `dead_letter_queue` overrides it), attributes
//!   re-derived from the record, then `DeleteMessage`. A failed write leaves the message alone:
//!   it comes back after its visibility timeout and the write is tried again.
//! * **Native settle** (dead-lettering off, a poison body or a gated message): nothing at all.
//!   Visibility expiry redelivers it and the queue's `RedrivePolicy` moves it to the queue's
//!   own dead-letter queue after `maxReceiveCount` receives. **Configure a RedrivePolicy with
//!   `maxReceiveCount` ≥ `max_attempts`** on every queue you consume with dead-lettering off;
//!   without one such a message comes back until the retention period ends.
//!
//! # Capabilities
//!
//! [`Transport::capabilities`](babelqueue_core::Transport::capabilities): sends with headers
//! and delays (`Sends`), native redelivery (`Redelivery::Native`: the visibility timeout),
//! `NativeSettler` (no-op), `DeadLetterNamer` (`-dlq`), and an `Inspector` for tools that show
//! the wire (the `MessageId` as a delivery's id, `ApproximateReceiveCount > 1` as
//! `redelivered`, the count itself as a property). No rewinder, no dead-letter writer, no
//! routed or settle publisher, no abandoner, no browser, no batch popper. The receive count
//! travels on each delivery as a fact (above), not as a capability.
//!
//! # Batches and concurrency
//!
//! One `ReceiveMessage` takes up to N messages, where N is what the runtime holds at once: its
//! `concurrency`, or the app's `prefetch` (`App::consume` announces it through
//! [`Transport::prepare_consume`](babelqueue_core::Transport::prepare_consume), capped at
//! SQS's 10), or the fixed `max_messages` (URL option, [`SqsOptions::max_messages`] or
//! [`SqsTransport::set_max_messages`]). The first is handed to the runtime and the others wait
//! in the transport, already received (their visibility timeout running), until the runtime's
//! next `pop`; keep the visibility timeout comfortably above two handler runs.
//! [`Transport::close`](babelqueue_core::Transport::close) (after a signal) and
//! [`SqsTransport::release_buffered`] make buffered messages visible again; call the latter
//! when a bounded `consume` (`max_messages`, an idle timeout) ended and the transport lives on.
//!
//! # Testing without AWS
//!
//! [`SqsTransport::new`] takes any [`SqsClient`]; `fake::FakeSqs` (the `fake` feature) records
//! every call. The
//! crate's integration tests and benchmark run against moto's server on 127.0.0.1 (see
//! `docs/transports/sqs.md`).
//!
//! # Deviations from the reference SDK (Python 1.24.0)
//!
//! * FIFO without `meta.id` (a gate or poison dead-letter record): the `MessageDeduplicationId`
//!   is the SHA-256 of the body, so the send works without content-based deduplication.
//! * A queue name ending in `.fifo` is FIFO even without `fifo=1` (group id, dedup id, no
//!   per-message delay).
//! * Number attributes are projected only from 64-bit integers, and text attributes only when
//!   SQS accepts their characters; other values are left out instead of failing the send (a
//!   dead-letter record of a malformed body must still be writable).
//! * A header SQS cannot carry (bad name, forbidden characters) and a body outside SQS's
//!   character set are errors before sending, instead of an SQS rejection.
//! * A per-message delay must be whole seconds (a `Duration` can hold fractions).
//! * An unknown URL option or an out-of-range number is an error (the reference ignores them).
//! * `max_messages` batching (the reference always receives one message).

mod client;
mod config;
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

pub use aws_sdk_sqs;
pub use client::{AwsSqs, ReceiveMessage, ReceivedMessage, SendMessage, SqsClient};
#[allow(deprecated)]
pub use config::SqsConfig;
pub use config::{SqsOptions, URL_OPTIONS};
pub use error::SqsError;
pub use transport::SqsTransport;
