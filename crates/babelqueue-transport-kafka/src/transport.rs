//! [`KafkaTransport`]: the runtime's [`Transport`] over Kafka, with its capabilities.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use babelqueue_core::{
    BatchAcker, BatchPopper, BatchPublisher, Capabilities, Delivery, Outgoing, Redeliver,
    Redelivered, Redeliverer, Redelivery, Rewinder, Sends, Transport, TransportError,
    TransportErrorKind,
};

use crate::book::Book;
use crate::client::{
    KafkaClient, KafkaConsumer, KafkaProducer, LentRecord, OutRecord, RecordHeader, TimestampType,
    TopicPartition,
};
use crate::config::{KafkaOptions, RetryTiers, retry_topic};
use crate::error::KafkaError;
use crate::owed::Owed;
use crate::projection::{self, HEADER_ATTEMPTS, HEADER_DELAY, HEADER_ORIGINAL_TOPIC};
use crate::rd::RdKafkaClient;

const LOG: &str = "babelqueue::kafka";

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every mutation under these locks is a single step; a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// One work topic's consumer and its in-flight book.
struct Queue {
    name: Arc<str>,
    consumer: Arc<dyn KafkaConsumer>,
    book: Arc<Mutex<Book>>,
    /// Positions released by the book and waiting for the commit interval. Lock order: `owed`
    /// before `book` (a position is taken from the book and parked in one step, so parked
    /// positions only move forward).
    owed: Arc<Mutex<Owed>>,
    /// Serialises commits so a later position is never overtaken by an earlier one.
    commits: tokio::sync::Mutex<()>,
}

impl Queue {
    /// Takes what the book releases on `partition` and parks it; `true` when something was.
    fn release(&self, partition: &TopicPartition) -> bool {
        let mut owed = lock(&self.owed);
        let next = lock(&self.book).take_committable(partition);
        match next {
            Some(next) => {
                owed.park(partition.clone(), next);
                true
            }
            None => false,
        }
    }

    /// Commits every owed position now (one at a time, under the commit lock). A failed commit
    /// parks its position again for the next flush; the first error is returned.
    async fn flush(&self) -> Result<(), KafkaError> {
        let _serial = self.commits.lock().await;
        let due = lock(&self.owed).take_for_flush(Instant::now());
        let mut first_error = None;
        for (partition, next) in due {
            if let Err(e) = self.consumer.commit(&partition, next).await {
                lock(&self.owed).park(partition, next);
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Makes sure a background flush will commit what is owed within `interval` of the last
    /// one. The task keeps flushing while commits are owed (records settled while it ran), so
    /// a consumer that stops receiving still gets its last acknowledgements committed.
    fn schedule_flush(self: &Arc<Self>, interval: Duration) {
        let Some(mut wait) = lock(&self.owed).schedule(Instant::now(), interval) else {
            return;
        };
        let queue = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(wait).await;
                if let Err(e) = queue.flush().await {
                    tracing::warn!(target: LOG, queue = %queue.name, error = %e,
                        "Committing settled Kafka records failed; retrying at the next interval");
                }
                match lock(&queue.owed).schedule(Instant::now(), interval) {
                    Some(next) => wait = next,
                    None => break,
                }
            }
        });
    }
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.name)
            .field("held", &lock(&self.book).len())
            .finish_non_exhaustive()
    }
}

/// The settle handle of a delivery: where the record sits and its ticket in the book, and its
/// timestamp (for the [`Inspector`](babelqueue_core::Inspector)). Dropped unsettled (its task
/// died), it marks the record abandoned, to be sought back before the next fetch.
pub(crate) struct Held {
    queue: Arc<Queue>,
    pub(crate) partition: Arc<TopicPartition>,
    pub(crate) offset: i64,
    ticket: u64,
    /// The record's timestamp in epoch milliseconds, when it has one, and what it is.
    pub(crate) timestamp: Option<i64>,
    pub(crate) timestamp_type: TimestampType,
    /// Set once the book marked this hand-out settled: its drop then has nothing to mark
    /// abandoned (the book ignores an abandon after a settle), so it skips the book's lock and
    /// look-up, once per record.
    settled: AtomicBool,
}

impl Held {
    /// Marks this hand-out settled in `book`; `false` when the book no longer holds it (its
    /// partition was revoked or rewound).
    fn settle_in(&self, book: &mut Book) -> bool {
        let settled = book.settle(&self.partition, self.offset, self.ticket);
        if settled {
            self.settled.store(true, Ordering::Relaxed);
        }
        settled
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !*self.settled.get_mut() {
            lock(&self.queue.book).abandon(&self.partition, self.offset, self.ticket);
        }
    }
}

struct Inner {
    client: Arc<dyn KafkaClient>,
    group_id: String,
    delivery_timeout: Duration,
    tiers: RetryTiers,
    /// How long settled records may wait for their commit, in microseconds (0: at once).
    commit_interval_us: AtomicU64,
    queues: Mutex<HashMap<String, Arc<Queue>>>,
}

/// How long a batch's settled records wait, at most, for their (background) commit unless
/// [`KafkaTransport::set_commit_interval`] says otherwise.
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_millis(200);

/// The Kafka transport.
///
/// * `publish` writes the envelope as the record value with the `bq-*` headers and
///   `meta.created_at` as the record timestamp, and waits for the broker's confirmation;
/// * `pop` classifies the record (schema-version gate, poison, identity), reconciles
///   `attempts` with the authoritative `bq-attempts` header, and holds it in flight;
/// * `ack` commits, per partition, only up to the lowest record still in flight;
/// * settle writes (retry tier, dead letter, redrive restore) keep the record key and are
///   confirmed before the commit; the runtime rewinds (seeks back) when one fails.
///
/// See the [crate documentation](crate) for the full contract.
#[derive(Clone)]
pub struct KafkaTransport {
    inner: Arc<Inner>,
}

impl fmt::Debug for KafkaTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaTransport")
            .field("client", &self.inner.client)
            .field("group_id", &self.inner.group_id)
            .field("retry_tiers", &self.inner.tiers)
            .finish_non_exhaustive()
    }
}

impl KafkaTransport {
    /// A transport for a `kafka://` URL (see [`KafkaOptions::from_url`]). Nothing connects
    /// until the first publish or pop: librdkafka connects in the background, so this only
    /// reads the URL (it is `async` like every transport's `connect`).
    pub async fn connect(url: &str) -> Result<KafkaTransport, KafkaError> {
        Ok(KafkaTransport::new(KafkaOptions::from_url(url)?))
    }

    /// [`connect`](KafkaTransport::connect) starting from `options`: what the URL names
    /// (bootstrap servers, credentials, query keys) overrides them.
    pub async fn connect_with(
        url: &str,
        options: KafkaOptions,
    ) -> Result<KafkaTransport, KafkaError> {
        Ok(KafkaTransport::new(KafkaOptions::from_url_onto(
            url, options,
        )?))
    }

    /// A transport on librdkafka for `config`.
    pub fn new(config: KafkaOptions) -> KafkaTransport {
        let client = Arc::new(RdKafkaClient::new(config));
        KafkaTransport::with_client(client.clone(), client.config())
    }

    /// A transport over any [`KafkaClient`] (the `fake` one in tests); the client options of
    /// `config` are the client's business, the rest is the transport's.
    pub fn with_client(client: Arc<dyn KafkaClient>, config: &KafkaOptions) -> KafkaTransport {
        KafkaTransport {
            inner: Arc::new(Inner {
                client,
                group_id: config.group_id.clone(),
                delivery_timeout: config.delivery_timeout,
                tiers: config.retry_tiers.clone(),
                commit_interval_us: AtomicU64::new(
                    u64::try_from(DEFAULT_COMMIT_INTERVAL.as_micros()).unwrap_or(u64::MAX),
                ),
                queues: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The retry tiers (empty: retries and delayed publishes are refused).
    pub fn retry_tiers(&self) -> &RetryTiers {
        &self.inner.tiers
    }

    /// How long the records a [`BatchAcker::ack_batch`] settled may wait for their commit
    /// (default [`DEFAULT_COMMIT_INTERVAL`]). A busy consumer then commits a few times a
    /// second from a background task instead of waiting for a commit per batch; a commit still
    /// never covers a record not yet settled, a rebalance commits what is owed on the
    /// partitions it takes away before they go, and [`close`](Transport::close) commits the
    /// rest. A record whose commit was still waiting when the process died comes again
    /// (at-least-once). `Duration::ZERO` commits each batch before `ack_batch` returns.
    /// A single [`ack`](Transport::ack) always commits before it returns.
    pub fn set_commit_interval(&self, interval: Duration) {
        self.inner.commit_interval_us.store(
            u64::try_from(interval.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    fn commit_interval(&self) -> Duration {
        Duration::from_micros(self.inner.commit_interval_us.load(Ordering::Relaxed))
    }

    /// The work-topic consumers' group.
    pub fn group_id(&self) -> &str {
        &self.inner.group_id
    }

    /// Records of `queue` handed out and not yet committed (in flight, or acknowledged and
    /// waiting for an earlier record of their partition).
    pub fn held(&self, queue: &str) -> usize {
        lock(&self.inner.queues)
            .get(queue)
            .map_or(0, |q| lock(&q.book).len())
    }

    fn producer(&self) -> Result<Arc<dyn KafkaProducer>, KafkaError> {
        self.inner.client.producer()
    }

    /// The client (for the browse module).
    pub(crate) fn client(&self) -> Arc<dyn KafkaClient> {
        self.inner.client.clone()
    }

    fn queue(&self, name: &str) -> Result<Arc<Queue>, KafkaError> {
        let mut queues = lock(&self.inner.queues);
        if let Some(q) = queues.get(name) {
            return Ok(q.clone());
        }
        let book = Arc::new(Mutex::new(Book::default()));
        let owed = Arc::new(Mutex::new(Owed::default()));
        let (revoked, owed_on_revoke) = (book.clone(), owed.clone());
        let consumer = self.inner.client.consumer(
            &self.inner.group_id,
            &[name.to_owned()],
            Arc::new(move |partitions: &[TopicPartition]| {
                let mut owed = lock(&owed_on_revoke);
                lock(&revoked).revoke(partitions);
                owed.take(partitions)
            }),
        )?;
        let queue = Arc::new(Queue {
            name: Arc::from(name),
            consumer,
            book,
            owed,
            commits: tokio::sync::Mutex::new(()),
        });
        queues.insert(name.to_owned(), queue.clone());
        Ok(queue)
    }

    /// Writes `record` and waits for its delivery report.
    async fn produce(&self, record: OutRecord) -> Result<(), KafkaError> {
        self.producer()?
            .send(record, self.inner.delivery_timeout)
            .await
    }

    /// The record carrying `body`: the projected headers (none when the body is not an
    /// envelope, e.g. not UTF-8) and `meta.created_at` as the timestamp.
    fn record(topic: &str, body: &[u8], key: Option<&[u8]>) -> OutRecord {
        let (headers, timestamp) = projection::project_with_timestamp(body);
        OutRecord {
            topic: topic.to_owned(),
            key: key.map(<[u8]>::to_vec),
            value: body.to_vec(),
            headers,
            timestamp,
        }
    }

    /// The tier a delayed publish parks on, and the delay in milliseconds: refused without
    /// tiers, for a delay that is not whole milliseconds, or above the largest tier (nothing is
    /// clamped).
    fn tier_for(&self, delay: Duration) -> Result<(usize, u128), KafkaError> {
        let tiers = &self.inner.tiers;
        if tiers.is_empty() {
            return Err(KafkaError::NoRetryTiers {
                operation: "delayed publish",
            });
        }
        if !delay.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(KafkaError::DelayNotWholeMillis(delay));
        }
        let delay_ms = delay.as_millis();
        match tiers.for_delay(delay_ms) {
            Some((n, _)) => Ok((n, delay_ms)),
            None => Err(KafkaError::DelayTooLong {
                requested_ms: delay_ms,
                largest_ms: tiers.as_millis().last().copied().unwrap_or_default(),
            }),
        }
    }

    /// A record parked on tier `n` of `work_topic`: the projection (with `bq-attempts`
    /// replaced when given), `bq-delay` and `bq-original-topic`. No timestamp: the broker's
    /// append time is when the tier's wait starts.
    fn tier_record(
        work_topic: &str,
        n: usize,
        body: &[u8],
        delay_ms: u128,
        attempts: Option<i64>,
        key: Option<&[u8]>,
    ) -> OutRecord {
        let mut headers = projection::project(body);
        headers.retain(|h| {
            h.key != HEADER_DELAY
                && h.key != HEADER_ORIGINAL_TOPIC
                && (attempts.is_none() || h.key != HEADER_ATTEMPTS)
        });
        if let Some(attempts) = attempts {
            headers.push(RecordHeader::text(HEADER_ATTEMPTS, attempts.to_string()));
        }
        headers.push(RecordHeader::text(HEADER_DELAY, delay_ms.to_string()));
        headers.push(RecordHeader::text(HEADER_ORIGINAL_TOPIC, work_topic));
        OutRecord {
            topic: retry_topic(work_topic, n),
            key: key.map(<[u8]>::to_vec),
            value: body.to_vec(),
            headers,
            timestamp: None,
        }
    }

    /// Seeks back every partition holding an abandoned record (a delivery dropped unsettled),
    /// to the lowest such record. A failed seek (the partition moved in a rebalance) is logged:
    /// the next owner starts from the committed offset, which is at or before the record.
    async fn reseek_abandoned(&self, queue: &Queue) {
        let targets = lock(&queue.book).take_abandoned();
        for (partition, offset) in targets {
            tracing::warn!(target: LOG, %partition, offset,
                "A Kafka record was dropped without being settled; seeking back to it so it is delivered again");
            if let Err(e) = queue.consumer.seek(&partition, offset).await {
                tracing::warn!(target: LOG, %partition, offset, error = %e, "Seeking back to an abandoned record failed");
            }
        }
    }

    /// A delivery of `record`: its value and key copied, the facts and the out-of-band
    /// headers read from its headers where the client holds them.
    fn deliver(&self, queue: &Arc<Queue>, record: LentRecord<'_>) -> Delivery {
        let (facts, headers) = projection::facts_and_headers(record.headers);
        let (partition, ticket) = {
            let mut book = lock(&queue.book);
            let partition = book.shared(record.topic, record.partition);
            let ticket = book.track(&partition, record.offset);
            (partition, ticket)
        };
        Delivery::new(
            Arc::clone(&queue.name),
            record.value.unwrap_or_default().to_vec(),
        )
        .with_facts(facts)
        .with_key(record.key.map(<[u8]>::to_vec))
        .with_headers(headers)
        .with_handle(Held {
            queue: queue.clone(),
            partition,
            offset: record.offset,
            ticket,
            timestamp: record.timestamp,
            timestamp_type: record.timestamp_type,
            settled: AtomicBool::new(false),
        })
    }

    /// Up to `max` records of `queue` (the first waiting up to `timeout`), as deliveries.
    async fn take(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        let q = self.queue(queue)?;
        self.reseek_abandoned(&q).await;
        let started = tokio::time::Instant::now();
        let mut deliveries = Vec::new();
        let polled = q
            .consumer
            .poll_batch_lent(max.max(1), timeout, &mut |record| {
                deliveries.push(self.deliver(&q, record));
            })
            .await;
        match polled {
            Ok(_) => Ok(deliveries),
            // A client that fails after lending records breaks the seam's contract; the
            // records lent are tracked deliveries all the same, and the next poll meets the
            // error again.
            Err(e) if !deliveries.is_empty() => {
                tracing::warn!(target: LOG, queue, error = %e, taken = deliveries.len(),
                    "The Kafka client failed a poll after lending records; handing out those it lent");
                Ok(deliveries)
            }
            // Refused credentials (and a consumer fenced by another with its static member
            // id) do not heal by polling again: the runtime stops with the error.
            Err(e)
                if matches!(
                    e.kind(),
                    TransportErrorKind::Auth | TransportErrorKind::Config
                ) =>
            {
                Err(e.into())
            }
            Err(e) => {
                // librdkafka reports broker and subscription trouble as events on the poll and
                // keeps retrying by itself; the librdkafka client already reads past those
                // events within the poll (one a poll would leave the worker minutes behind its
                // queue after a broker outage). An error that still comes out here (one past
                // the client's bound on a single poll, or from another client) is reported and
                // the poll waited out, so that an error returned at once on every poll does not
                // turn into a busy loop.
                tracing::warn!(target: LOG, queue, error = %e, "Kafka poll reported an error");
                tokio::time::sleep_until(started + timeout).await;
                Ok(Vec::new())
            }
        }
    }

    /// Marks `held` settled and commits what that allows. Commits of a partition run one at a
    /// time; an acknowledgement that waited for the one before it usually finds its record
    /// already covered (a commit takes every settled record at the head of the partition), so
    /// concurrent handlers share commits. It returns once a commit covering the record is done,
    /// or at once when an earlier record is still unsettled (the commit is deferred to it).
    async fn settle(&self, held: &Held) -> Result<(), KafkaError> {
        let queue = &held.queue;
        if !held.settle_in(&mut lock(&queue.book)) {
            tracing::debug!(target: LOG, partition = %held.partition, offset = held.offset,
                "Not committing a record whose partition was revoked or rewound; it comes again");
            return Ok(());
        }
        let _serial = queue.commits.lock().await;
        // What a batch parked on this partition goes out with it (commits are cumulative).
        let next = {
            let mut owed = lock(&queue.owed);
            let next = lock(&queue.book).take_committable(&held.partition);
            let parked = owed.take(std::slice::from_ref(&held.partition));
            next.into_iter()
                .chain(parked.into_iter().map(|(_, n)| n))
                .max()
        };
        match next {
            Some(next) => queue.consumer.commit(&held.partition, next).await,
            None => Ok(()),
        }
    }

    /// Commits what is owed, closes every consumer and flushes the producer.
    pub async fn shutdown(&self) -> Result<(), KafkaError> {
        let queues: Vec<Arc<Queue>> = lock(&self.inner.queues).drain().map(|(_, q)| q).collect();
        let mut first_error = None;
        for queue in queues {
            if let Err(e) = queue.flush().await {
                tracing::warn!(target: LOG, queue = %queue.name, error = %e,
                    "Committing settled Kafka records at shutdown failed; they will be delivered again");
                first_error.get_or_insert(e);
            }
            queue.consumer.close().await;
        }
        self.producer()?.flush(self.inner.delivery_timeout).await?;
        first_error.map_or(Ok(()), Err)
    }
}

#[async_trait]
impl Transport for KafkaTransport {
    fn name(&self) -> &'static str {
        "kafka"
    }

    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        Ok(self
            .produce(KafkaTransport::record(queue, body, None))
            .await?)
    }

    /// A confirmed write of the body (byte for byte, its projection as headers, none when it
    /// is not an envelope) carrying the key as it was consumed (null stays null, empty stays
    /// empty), with out-of-band headers beside the `bq-*` projection (which wins: a header
    /// named like a contract header is left out). With a delay the record parks on the smallest
    /// tier covering it (`bq-delay` = the requested delay), refused, with nothing written,
    /// without tiers, above the largest tier, or for a delay that is not whole milliseconds.
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        let (queue, body, key) = (outgoing.queue, outgoing.body, outgoing.key);
        let mut record = match outgoing.delay {
            None => KafkaTransport::record(queue, body, key),
            Some(delay) => {
                let (n, delay_ms) = self.tier_for(delay)?;
                KafkaTransport::tier_record(queue, n, body, delay_ms, None, key)
            }
        };
        for (name, value) in outgoing.headers.into_iter().flatten() {
            if !name.is_empty()
                && !value.is_empty()
                && !projection::HEADERS.contains(&name.as_str())
            {
                record.headers.push(RecordHeader::text(name.clone(), value));
            }
        }
        Ok(self.produce(record).await?)
    }

    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        Ok(self.take(queue, 1, timeout).await?.pop())
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        match delivery.handle::<Held>() {
            Some(held) => Ok(self.settle(held).await?),
            None => Ok(()),
        }
    }

    /// The first record waits up to `timeout`; then what the consumer has at hand, up to
    /// `max`, without waiting.
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        self.take(queue, max, timeout).await
    }

    async fn close(&self) -> Result<(), TransportError> {
        Ok(self.shutdown().await?)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        // Without retry tiers a record can only be retried in place: the runtime leaves a retry
        // unsettled and seeks back to it, drops an undeliverable poison record when
        // dead-lettering is off, and warns at start-up.
        let redelivery = if self.inner.tiers.is_empty() {
            Redelivery::Impossible
        } else {
            Redelivery::Native(self)
        };
        Capabilities::none()
            .sends(Sends::body_only().headers().delay().key().confirmed())
            .redelivery(redelivery)
            .rewind(self)
            .batch_pop(self)
            .batch_ack(self)
            .batch_publish(self)
            .browse(self)
            .inspect(self)
            .stats(self)
    }
}

#[async_trait]
impl BatchAcker for KafkaTransport {
    /// Marks every record settled, then commits each partition once, as far as its settled
    /// records reach (a record still in flight before them holds the commit back, as for one
    /// acknowledgement): from a background task within the commit interval
    /// ([`KafkaTransport::set_commit_interval`]), or before returning when it is zero.
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError> {
        let mut touched: Vec<(Arc<Queue>, Arc<TopicPartition>)> = Vec::new();
        for held in deliveries.iter().filter_map(|d| d.handle::<Held>()) {
            let queue = &held.queue;
            if held.settle_in(&mut lock(&queue.book))
                && !touched
                    .iter()
                    .any(|(q, p)| Arc::ptr_eq(q, queue) && p.as_ref() == held.partition.as_ref())
            {
                touched.push((queue.clone(), Arc::clone(&held.partition)));
            }
        }
        let mut released: Vec<Arc<Queue>> = Vec::new();
        for (queue, partition) in touched {
            if queue.release(&partition) && !released.iter().any(|q| Arc::ptr_eq(q, &queue)) {
                released.push(queue);
            }
        }
        let interval = self.commit_interval();
        let mut first_error = None;
        for queue in released {
            if interval.is_zero() {
                if let Err(e) = queue.flush().await {
                    first_error.get_or_insert(e);
                }
            } else {
                queue.schedule_flush(interval);
            }
        }
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }
}

#[async_trait]
impl BatchPublisher for KafkaTransport {
    /// Writes every body as [`publish`](Transport::publish) would, in order, with up to
    /// [`PRODUCE_WINDOW`](crate::PRODUCE_WINDOW) delivery reports outstanding at once; `Ok`
    /// once every record was confirmed, else the first record's error (the others were still
    /// written, and each outcome was awaited).
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        // Each record is made when its turn to be written comes, so a large batch never holds
        // a second copy of every body at once.
        let make = |n: usize| KafkaTransport::record(queue, bodies[n], None);
        let outcomes = self
            .producer()?
            .send_made(bodies.len(), &make, self.inner.delivery_timeout)
            .await;
        match outcomes.into_iter().find_map(Result::err) {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

/// Retry tiers as a policy: the runtime computes the delay as for every broker (back-off,
/// multiplier, jitter, `retry_after`, the release delay); the record parks on the tier that
/// delay maps to ([`RetryTiers::for_redelivery`]), with `bq-attempts` = the runtime's count
/// when it counted one, `bq-delay` and `bq-original-topic`, and the key kept. Once that write
/// is confirmed the runtime commits the original ([`Redelivered::Copied`]). Offered only with tiers (without them the runtime's
/// [`Redelivery::Impossible`] applies).
#[async_trait]
impl Redeliverer for KafkaTransport {
    async fn redeliver(
        &self,
        delivery: &Delivery,
        redeliver: Redeliver<'_>,
    ) -> Result<Redelivered, TransportError> {
        let tiers = &self.inner.tiers;
        let Some((n, delay_ms)) = tiers.for_redelivery(redeliver.delay, redeliver.attempts) else {
            return Err(KafkaError::NoRetryTiers { operation: "retry" }.into());
        };
        if let (Some(delay), Some(largest)) = (redeliver.delay, tiers.as_millis().last())
            && delay.as_millis() > u128::from(*largest)
        {
            tracing::warn!(target: LOG, queue = delivery.queue(), requested = ?delay, largest_ms = largest,
                "A redelivery delay above the largest retry tier is parked on the largest tier");
        }
        let record = KafkaTransport::tier_record(
            delivery.queue(),
            n,
            redeliver.body,
            delay_ms,
            redeliver.attempts,
            delivery.key(),
        );
        self.produce(record).await?;
        Ok(Redelivered::Copied)
    }
}

#[async_trait]
impl Rewinder for KafkaTransport {
    /// Seeks the record's partition back to it, forgetting it and every later record of the
    /// partition still held (they all come again). A record already taken back by an earlier
    /// rewind or a rebalance is left alone.
    async fn rewind(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let Some(held) = delivery.handle::<Held>() else {
            return Ok(());
        };
        let seek = lock(&held.queue.book).rewind(&held.partition, held.offset, held.ticket);
        if !seek {
            return Ok(());
        }
        if let Err(e) = held.queue.consumer.seek(&held.partition, held.offset).await {
            tracing::error!(target: LOG, partition = %held.partition, offset = held.offset, error = %e,
                "Kafka seek back to {}@{} failed; the unsettled record may be skipped by a later commit on this partition",
                held.partition, held.offset);
            return Err(e.into());
        }
        Ok(())
    }
}

#[async_trait]
impl BatchPopper for KafkaTransport {
    /// Up to `max` records (0: all available), all held unsettled; abandoned records are
    /// sought back once, first. A poll error ends the batch (it is an error only when nothing
    /// was taken).
    async fn pop_batch(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        let q = self.queue(queue)?;
        self.reseek_abandoned(&q).await;
        let mut batch = Vec::new();
        while max == 0 || batch.len() < max {
            match q.consumer.poll(timeout).await {
                Ok(Some(record)) => batch.push(self.deliver(&q, record.lend())),
                Ok(None) => break,
                Err(e) if batch.is_empty() => return Err(e.into()),
                Err(e) => {
                    tracing::warn!(target: LOG, queue, error = %e, taken = batch.len(),
                        "Kafka poll failed mid-batch; ending the batch");
                    break;
                }
            }
        }
        Ok(batch)
    }
}
