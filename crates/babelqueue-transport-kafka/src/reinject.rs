//! [`RetryReinjector`]: moves records parked on `<work>.retry.<n>` back to their work topic
//! once the tier's delay has passed.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::client::{KafkaClient, KafkaConsumer, KafkaProducer, OutRecord, Record, TopicPartition};
use crate::config::{
    DEFAULT_REINJECT_GROUP_ID, KafkaOptions, RetryTiers, parse_retry_topic, retry_topic,
};
use crate::error::KafkaError;
use crate::projection::{self, HEADER_ORIGINAL_TOPIC};
use crate::rd::RdKafkaClient;

const LOG: &str = "babelqueue::kafka::reinject";

/// A clock giving epoch milliseconds.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// How long the re-injector leaves a partition alone after a failed write.
const FAILURE_PAUSE: Duration = Duration::from_secs(1);

fn system_clock() -> i64 {
    babelqueue_envelope::now_millis()
}

/// The re-inject consumer: run one next to the workers of every work topic that has retry
/// tiers; without it a parked record never comes back.
///
/// * It consumes every `<work>.retry.<n>` (n = 1..=N) in group `babelqueue-retry-reinject`,
///   with auto-commit off.
/// * A record is due at its timestamp plus its tier's delay, clamped to `[now, now + tier]`
///   (no timestamp: `now + tier`). Until then its partition is paused and held in memory; the
///   poll loop never blocks on a wait, and a record never overtakes an earlier one of its
///   partition.
/// * Re-injecting copies the value and the key byte for byte to the `bq-original-topic`
///   header's topic (else the work part of the tier topic's name), with every header but
///   `bq-delay` and `bq-original-topic`, and no timestamp; `attempts` is not touched.
/// * The tier record is committed only after the write is confirmed. A failed write seeks the
///   partition back to the record (it and everything after it come again), resumes it, and
///   leaves the partition alone for a second.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), babelqueue_transport_kafka::KafkaError> {
/// use babelqueue_transport_kafka::{KafkaOptions, RetryReinjector};
///
/// let config = KafkaOptions::from_url("kafka://127.0.0.1:9092?retry_tiers_ms=default")?;
/// let mut reinjector = RetryReinjector::new(&config, &["orders".to_owned()])?;
/// reinjector.run(async { tokio::signal::ctrl_c().await.ok(); }).await;
/// # Ok(()) }
/// ```
pub struct RetryReinjector {
    consumer: Arc<dyn KafkaConsumer>,
    producer: Arc<dyn KafkaProducer>,
    tiers: RetryTiers,
    topics: Vec<String>,
    delivery_timeout: Duration,
    poll_interval: Duration,
    clock: Clock,
    held: BTreeMap<TopicPartition, VecDeque<(Record, i64)>>,
    revoked: Arc<Mutex<Vec<TopicPartition>>>,
    quiet_until: BTreeMap<TopicPartition, i64>,
}

impl fmt::Debug for RetryReinjector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryReinjector")
            .field("topics", &self.topics)
            .field("tiers", &self.tiers)
            .field("held", &self.held())
            .finish_non_exhaustive()
    }
}

impl RetryReinjector {
    /// A re-injector on librdkafka for the work topics `work_topics`, with the tiers of
    /// `config` (the same list the workers use) in group `babelqueue-retry-reinject`.
    pub fn new(
        config: &KafkaOptions,
        work_topics: &[String],
    ) -> Result<RetryReinjector, KafkaError> {
        RetryReinjector::with_client(
            &RdKafkaClient::new(config.clone()),
            config,
            work_topics,
            DEFAULT_REINJECT_GROUP_ID,
        )
    }

    /// A re-injector over any [`KafkaClient`], in consumer group `group_id`.
    pub fn with_client(
        client: &dyn KafkaClient,
        config: &KafkaOptions,
        work_topics: &[String],
        group_id: &str,
    ) -> Result<RetryReinjector, KafkaError> {
        let tiers = config.retry_tiers.clone();
        if tiers.is_empty() {
            return Err(KafkaError::Config(
                "the re-injector needs the retry tiers the workers use".into(),
            ));
        }
        if work_topics.is_empty() || work_topics.iter().any(String::is_empty) {
            return Err(KafkaError::Config(
                "the re-injector needs at least one (non-empty) work topic".into(),
            ));
        }
        let topics: Vec<String> = work_topics
            .iter()
            .flat_map(|work| (1..=tiers.len()).map(move |n| retry_topic(work, n)))
            .collect();
        let revoked = Arc::new(Mutex::new(Vec::new()));
        let hook = revoked.clone();
        let consumer = client.consumer(
            group_id,
            &topics,
            Arc::new(move |partitions: &[TopicPartition]| {
                hook.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(partitions.iter().cloned());
                // The re-injector commits each record before the next: nothing is owed.
                Vec::new()
            }),
        )?;
        Ok(RetryReinjector {
            consumer,
            producer: client.producer()?,
            tiers,
            topics,
            delivery_timeout: config.delivery_timeout,
            poll_interval: Duration::from_secs(1),
            clock: Arc::new(system_clock),
            held: BTreeMap::new(),
            revoked,
            quiet_until: BTreeMap::new(),
        })
    }

    /// Replaces the clock (epoch milliseconds), for tests.
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> RetryReinjector {
        self.clock = clock;
        self
    }

    /// The longest single poll (default 1 s).
    #[must_use]
    pub fn with_poll_interval(mut self, interval: Duration) -> RetryReinjector {
        self.poll_interval = interval;
        self
    }

    /// The tier topics consumed.
    pub fn topics(&self) -> &[String] {
        &self.topics
    }

    /// Records held, waiting to be due.
    pub fn held(&self) -> usize {
        self.held.values().map(VecDeque::len).sum()
    }

    /// Polls once (at most `timeout`, default the poll interval, and never past the nearest
    /// due record) and re-injects every record that is due. Returns how many were written.
    pub async fn run_once(&mut self, timeout: Option<Duration>) -> usize {
        self.forget_revoked();
        let mut wait = timeout.unwrap_or(self.poll_interval);
        let nearest = self
            .held
            .iter()
            .filter_map(|(partition, queue)| {
                let (_, due) = queue.front()?;
                let quiet = self.quiet_until.get(partition).copied().unwrap_or(i64::MIN);
                Some((*due).max(quiet))
            })
            .min();
        if let Some(nearest) = nearest {
            let until = u64::try_from(nearest.saturating_sub((self.clock)())).unwrap_or(0);
            wait = wait.min(Duration::from_millis(until));
        }
        match self.consumer.poll(wait).await {
            Ok(Some(record)) => self.accept(record).await,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(target: LOG, error = %e, "Kafka poll reported an error");
                if !e.is_transient() {
                    // A refusal (wrong credentials) comes back at once on every poll: wait out
                    // the poll instead of spinning.
                    tokio::time::sleep(wait).await;
                }
            }
        }
        self.forget_revoked();
        self.release_due().await
    }

    /// Re-injects until `shutdown` completes, then closes the consumer.
    pub async fn run<F: Future<Output = ()>>(&mut self, shutdown: F) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                _ = self.run_once(None) => {}
            }
        }
        self.close().await;
    }

    /// Leaves the group (held records are not committed: they come again) and flushes the
    /// producer.
    pub async fn close(&mut self) {
        self.held.clear();
        self.consumer.close().await;
        if let Err(e) = self.producer.flush(self.delivery_timeout).await {
            tracing::warn!(target: LOG, error = %e, "Flushing the re-injector's producer failed");
        }
    }

    fn forget_revoked(&mut self) {
        let revoked = std::mem::take(&mut *self.revoked.lock().unwrap_or_else(|p| p.into_inner()));
        for partition in revoked {
            self.held.remove(&partition);
            self.quiet_until.remove(&partition);
        }
    }

    async fn accept(&mut self, record: Record) {
        let partition = record.topic_partition();
        let tier_ms = parse_retry_topic(&record.topic).and_then(|(_, n)| self.tiers.tier_ms(n));
        let Some(tier_ms) = tier_ms else {
            tracing::error!(target: LOG, %partition, offset = record.offset,
                "A record on {:?} is not on a configured retry tier; committing past it", record.topic);
            if let Err(e) = self.consumer.commit(&partition, record.offset + 1).await {
                tracing::error!(target: LOG, %partition, error = %e, "Committing past it failed");
            }
            return;
        };
        let due = projection::due_at(record.timestamp, tier_ms, (self.clock)());
        self.held
            .entry(partition.clone())
            .or_default()
            .push_back((record, due));
        if let Err(e) = self.consumer.pause(&partition) {
            tracing::warn!(target: LOG, %partition, error = %e,
                "Could not pause the partition; its records are held in order anyway");
        }
    }

    async fn release_due(&mut self) -> usize {
        let mut written = 0;
        let now = (self.clock)();
        let partitions: Vec<TopicPartition> = self.held.keys().cloned().collect();
        for partition in partitions {
            if self
                .quiet_until
                .get(&partition)
                .is_some_and(|until| now < *until)
            {
                continue;
            }
            self.quiet_until.remove(&partition);
            let mut rewound = false;
            while let Some((record, due)) = self.held.get(&partition).and_then(VecDeque::front) {
                if *due > now {
                    break;
                }
                let record = record.clone();
                if let Err(e) = self.reinject(&record).await {
                    tracing::error!(target: LOG, %partition, offset = record.offset, error = %e,
                        "Re-injecting a record failed; seeking back to it to try again");
                    if let Err(e) = self.consumer.seek(&partition, record.offset).await {
                        tracing::error!(target: LOG, %partition, offset = record.offset, error = %e,
                            "Seeking back to the record failed; it comes again after a restart or a rebalance");
                    }
                    if let Err(e) = self.consumer.resume(&partition) {
                        tracing::warn!(target: LOG, %partition, error = %e, "Could not resume the partition");
                    }
                    self.held.remove(&partition);
                    let pause = i64::try_from(FAILURE_PAUSE.as_millis()).unwrap_or(1000);
                    self.quiet_until
                        .insert(partition.clone(), now.saturating_add(pause));
                    rewound = true;
                    break;
                }
                if let Err(e) = self.consumer.commit(&partition, record.offset + 1).await {
                    tracing::error!(target: LOG, %partition, offset = record.offset, error = %e,
                        "Committing a re-injected record failed; it may be re-injected again (a duplicate)");
                }
                if let Some(queue) = self.held.get_mut(&partition) {
                    queue.pop_front();
                }
                written += 1;
            }
            if self.held.get(&partition).is_some_and(VecDeque::is_empty) {
                self.held.remove(&partition);
                if !rewound && let Err(e) = self.consumer.resume(&partition) {
                    tracing::warn!(target: LOG, %partition, error = %e, "Could not resume the partition");
                }
            }
        }
        written
    }

    async fn reinject(&self, record: &Record) -> Result<(), KafkaError> {
        let target = projection::header_text(&record.headers, HEADER_ORIGINAL_TOPIC)
            .filter(|t| !t.is_empty())
            .or_else(|| parse_retry_topic(&record.topic).map(|(work, _)| work.to_owned()))
            .unwrap_or_else(|| record.topic.clone());
        let out = OutRecord {
            topic: target,
            key: record.key.clone(),
            value: record.value.clone().unwrap_or_default(),
            headers: projection::reinject_headers(&record.headers),
            timestamp: None,
        };
        self.producer.send(out, self.delivery_timeout).await
    }
}
