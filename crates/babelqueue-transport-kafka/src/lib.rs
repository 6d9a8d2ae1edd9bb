//! Apache Kafka transport for BabelQueue, on [`rdkafka`] (librdkafka, built statically).
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::{App, Consume, Context, HandlerError};
//! use babelqueue_transport_kafka::{KafkaTransport, RetryReinjector};
//!
//! // Retry tiers are opt-in: 5 s, 30 s, 5 min, 30 min here.
//! let url = "kafka://127.0.0.1:9092?retry_tiers_ms=default";
//! let app = App::builder(KafkaTransport::connect(url).await?)
//!     .queue("orders")
//!     .max_attempts(3)
//!     .dead_letter(true)
//!     .concurrency(8)
//!     .handle("urn:babel:orders:created", |ctx: Context| async move {
//!         println!("order {}", ctx.data());
//!         Ok::<(), HandlerError>(())
//!     })
//!     .build()?;
//! app.publish("urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
//!
//! // The re-injector moves parked retries back to `orders` once their tier has passed.
//! let config = babelqueue_transport_kafka::KafkaOptions::from_url(url)?;
//! let mut reinjector = RetryReinjector::new(&config, &["orders".to_owned()])?;
//! tokio::spawn(async move { reinjector.run(std::future::pending()).await });
//!
//! app.run().await?;
//! # Ok(()) }
//! ```
//!
//! # The wire
//!
//! * The record value is the envelope, byte for byte. The record headers project it as UTF-8
//!   strings, in this order: `bq-job`, `bq-trace-id`, `bq-message-id`, `bq-schema-version`,
//!   `bq-source-lang`, `bq-attempts` (see [`projection::project`]). The record timestamp is
//!   `meta.created_at`.
//! * Settle writes (retry tier, dead letter, poison and gate dead letter, redrive restore)
//!   carry the consumed record's key byte for byte: a null key stays null, an empty key stays
//!   empty, no key is made up. A body that is not UTF-8 is written back as its exact bytes,
//!   without headers.
//! * On consume, `bq-attempts` is authoritative: it overrides the body's `attempts`, even when
//!   lower (Kafka counts no deliveries itself); without it the body stands. Headers that are
//!   not `bq-*` contract headers (`traceparent`, `bq-replay-bypass` …) reach the handler.
//!
//! # Consuming: process, then commit
//!
//! One consumer per work topic, group `babelqueue`, auto-commit off, `earliest`. A record is
//! committed (`offset + 1`, synchronously) only after its handler finished and its settle
//! write, if any, was confirmed. With `concurrency` above 1 the commit of each partition only
//! advances to just below the lowest record still in flight: an acknowledgement that arrives
//! ahead of an unfinished record is deferred until that record settles, and one commit then
//! covers them all. Before each poll,
//! records whose delivery was dropped unsettled are sought back. A rebalance hands the
//! in-flight records of a revoked partition to the next owner (they are not committed here).
//!
//! Each record is handed to the runtime as it is, body untouched, with the facts its headers
//! carry (`projection::facts`): the first `bq-schema-version` header as declared (a header
//! without a value is null), `bq-attempts` as the authoritative count
//! ([`Count::Carried`](babelqueue_core::Count::Carried)), and `bq-original-topic` as the
//! original queue of a re-injected record. The runtime applies the schema-version gate,
//! classifies poison (a value that is not UTF-8, not one JSON object, a wrongly typed member,
//! a readable body with no `job`/`urn` identity: it never reaches a handler) and reconciles
//! `attempts`.
//!
//! The runtime decides what happens next (its decision tables) and this
//! transport carries it out: dead letters, including the ADR-0035 poison record the runtime
//! builds, go to `<queue>.dlq` with a confirmed write and then a commit; a failed write
//! commits nothing and seeks the partition back to the record, which comes again after the
//! runtime's pause (head-of-line blocking while the DLQ stays unwritable). Poison with
//! dead-lettering off and no tiers is committed and dropped (degrade-to-delete).
//!
//! # Retry tiers and delays
//!
//! Tiers are opt-in ([`DEFAULT_RETRY_TIERS_MS`] = 5 s, 30 s, 5 min, 30 min; positive,
//! strictly ascending). Tier `n` of a work topic is the topic `<topic>.retry.<n>`
//! ([`retry_topic`]); create the tier topics up front (the broker may auto-create them).
//!
//! * A retry (a failed handler, an unknown-URN release, the bounded retry of poison) parks the
//!   record on tier `n = min(attempts_before, N-1) + 1` with `attempts` and `bq-attempts` =
//!   attempts_before + 1, `bq-delay` = the tier's delay and `bq-original-topic` = the work
//!   topic, confirmed, then commits the original. The runtime's back-off delay is not used: the
//!   tier is the delay. Without tiers the retry fails, the runtime rewinds and the record
//!   fails in place; [`App::consume`](babelqueue_core::App::consume) warns at start-up when
//!   `max_attempts` > 1 and there are no tiers.
//! * a delayed send (`App::publish_delayed`) parks the record on the smallest tier covering the requested delay
//!   (`bq-delay` = the requested delay), and refuses a delay above the largest tier, one that
//!   is not whole milliseconds, or any delay without tiers: nothing is clamped.
//! * [`RetryReinjector`] (also `babelqueue kafka reinject` in the CLI) moves parked records
//!   back once due, copying value and key byte for byte, committing only after the confirmed
//!   write, in per-partition order.
//!
//! # URL
//!
//! `kafka://[user:password@]host:9092[,host2:9092][?option=value&…]`
//! ([`KafkaOptions::from_url`]):
//!
//! | option | meaning | default |
//! |---|---|---|
//! | `retry_tiers_ms` | `default`, `none`, or `5000,30000,…` | none |
//! | `group_id` | the work-topic consumers' group | `babelqueue` |
//! | `group_instance_id` | static membership: a stable id per worker process; each consumer gets `group.instance.id` = `<id>-<topic>` | none (dynamic) |
//! | `delivery_timeout_ms` | how long a confirmed write waits (also `message.timeout.ms`) | 30000 |
//! | `acks` | what a confirmed write waits for: `all` (every in-sync replica), `1` (the leader), `0` (nothing); see [`Acks`] | `all` |
//! | `replication_factor`, `min_insync_replicas` | of the topics [`RdKafkaClient::create_topics`] creates | the broker's |
//! | anything else | a librdkafka option (`linger.ms`, `security.protocol`, `session.timeout.ms` …) | |
//!
//! `user:password@` sets `sasl.username` / `sasl.password` (and `sasl.mechanism=PLAIN` unless
//! given); the query must then set `security.protocol` to `SASL_PLAINTEXT` or `SASL_SSL`.
//! Secrets never reach a message: [`KafkaOptions`]'s `Debug`, the errors and librdkafka's log
//! and error lines are masked ([`config::redact_url`], [`config::is_secret_option`]).
//!
//! # Replication
//!
//! Several bootstrap servers go in one URL (`kafka://h1:9092,h2:9092,h3:9092`); librdkafka
//! learns the rest of the cluster from them and follows partition leaders as they move. A
//! confirmed write waits for every in-sync replica (`acks=all`; `enable.idempotence=true` in
//! the URL also keeps librdkafka's retries across a leader change from writing a record twice,
//! at a cost in publish rate): with the topic's
//! `min.insync.replicas` at 2 or more, a leader that dies loses no confirmed write. While
//! fewer replicas than that are in sync, a write is not confirmed: it fails with the transient
//! [`KafkaError::NotEnoughReplicas`], which names the setting. The transport creates no topic
//! itself: the work, retry-tier and dead-letter topics get the broker's
//! `default.replication.factor` and `min.insync.replicas` (set them on the cluster), or are
//! provisioned beforehand. See `docs/transports/kafka.md` for the measured failovers.
//!
//! # Errors from the broker
//!
//! A broker that refuses the credentials (a failed SASL handshake) makes `publish` and `pop`
//! fail with [`TransportErrorKind::Auth`](babelqueue_core::TransportErrorKind) within the
//! moment librdkafka reports it (not after the delivery timeout), naming the bootstrap
//! servers; [`App::consume`](babelqueue_core::App::consume) stops with it. A consumer that
//! librdkafka gave up on (a fatal error, e.g. fenced by another member with the same
//! `group_instance_id`) is a `Config` error, returned too. Other poll errors (a broker that is
//! down, a rebalance) are logged and polled past within the same `pop`: librdkafka reconnects,
//! rejoins and fetches by itself, and a broker outage queues several of them a second ahead of
//! the records that follow, so a worker goes on within seconds of the broker's return.
//!
//! # Restarts
//!
//! With dynamic membership (the default) a worker restarted after a SIGKILL handles nothing
//! until its dead predecessor misses `session.timeout.ms` (45 s by default); with
//! `group_instance_id` (static membership) it takes the partitions back at once (about
//! 0.2 s measured), but a static worker that does not come back, or stops gracefully, keeps
//! them for the session timeout. See `docs/transports/kafka.md`.
//!
//! # Capabilities
//!
//! [`KafkaTransport`] classifies poison itself; its `send` declares headers, delays (tiers),
//! keys and confirmed writes (`Sends`: a settle write keeps the consumed record's key); it
//! offers `Redeliverer` (retry tiers; `can_redeliver()` is false without them),
//! `Rewinder` (seek), `BatchPopper` (redrive) and `Browser` (`babelqueue dlq list` reads a topic from the group's
//! committed offsets to the high watermarks, without joining the group or committing), and an
//! `Inspector` for tools that show the wire: a delivery's `topic/partition@offset`, its
//! timestamp and timestamp type, and its key (Kafka does not say whether it delivered a record
//! before).
//!
//! # Differences from the reference SDK (Python 1.24.0)
//!
//! * `publish` waits for the broker's confirmation (Python's is fire-and-forget), so a
//!   returned `publish` means the record is stored.
//! * Tier records carry no timestamp (the broker stamps them), so the tier delay holds under
//!   `CreateTime` topics; Python stamps them with `meta.created_at`, which makes an old message
//!   re-inject at once.
//! * The bounded retry of a poison record starts from its `bq-attempts` header (Python always
//!   starts the first hop at 0): the header on the tier record then matches the runtime's
//!   count.
//! * Concurrent handlers (`concurrency` > 1) with the watermark commit described above.
//! * The URL takes query options; Python takes them as constructor arguments.
//! * Non-`bq-*` headers reach the handler as out-of-band headers, and
//!   [`Transport::send`](babelqueue_core::Transport::send) writes them.
//! * A failed dead-letter write of a failed or unknown-URN envelope leaves it unsettled and
//!   the worker keeps running (Python lets the error escape `consume`).
//! * The consumers set `allow.auto.create.topics=true`, so consuming a topic that does not
//!   exist yet creates it where the broker allows.
//!
//! # Limits
//!
//! * A confirmed write that timed out may still land later (a duplicate, absorbed by
//!   at-least-once processing); `message.timeout.ms` is bounded by the delivery timeout to
//!   make that unlikely.
//! * A seek that fails (the partition moved in a rebalance at that moment) is logged with the
//!   record's position; the next owner starts from the committed offset.
//! * Each acknowledgement waits for a synchronous commit (a broker round trip) that covers its
//!   record, as in the reference, so throughput is bounded by commit latency; with concurrent
//!   handlers one commit covers every settled record at the head of the partition.
//! * A null record value (a tombstone) is poison; the re-injector writes it back as an empty
//!   value.
//! * All queues of one transport share its consumer group. Adding a consumer for another queue
//!   (redriving `orders.dlq` from the worker's own transport) rebalances the group, which waits
//!   until every member polls again: run DLQ tooling on its own transport or group.

mod book;
mod browse;
pub mod client;
#[cfg(test)]
mod commit_tests;
pub mod config;
mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod inspect;
mod isr;
mod owed;
// Public for the conformance runner and the fuzz targets, which check the wire mapping
// directly; it is not part of the API an application should build on.
#[doc(hidden)]
pub mod projection;
mod rd;
mod rd_reader;
mod reinject;
mod replication;
mod stats;
#[cfg(test)]
mod tests;
mod transport;

pub use client::{
    KafkaClient, KafkaConsumer, KafkaProducer, KafkaReader, LentRecord, OutRecord, PRODUCE_WINDOW,
    PartitionBounds, Record, RecordHeader, RecordHeaders, RevokeHook, TimestampType,
    TopicPartition,
};
#[allow(deprecated)]
pub use config::KafkaConfig;
pub use config::{
    DEFAULT_BROKERS, DEFAULT_DELIVERY_TIMEOUT, DEFAULT_GROUP_ID, DEFAULT_REINJECT_GROUP_ID,
    DEFAULT_RETRY_TIERS_MS, KafkaOptions, RetryTiers, parse_retry_topic, retry_topic,
};
pub use error::KafkaError;
pub use rd::RdKafkaClient;
pub use reinject::{Clock, RetryReinjector};
pub use replication::Acks;
pub use transport::{DEFAULT_COMMIT_INTERVAL, KafkaTransport};
