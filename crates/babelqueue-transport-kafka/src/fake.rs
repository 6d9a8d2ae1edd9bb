//! An in-memory Kafka behind the client seam, for tests and the conformance runner (feature
//! `fake`).
//!
//! Topics are append-only logs (one partition each unless created otherwise); each consumer
//! group has committed offsets; every consumer owns all partitions of its topics. Every write,
//! commit and seek is recorded so a test can assert on it, and writes to chosen topics can be
//! made to fail.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::TransportError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use babelqueue_core::Transport;
//! use babelqueue_transport_kafka::{KafkaOptions, KafkaTransport, fake::FakeKafka};
//!
//! let kafka = FakeKafka::new();
//! let transport = KafkaTransport::with_client(Arc::new(kafka.clone()), &KafkaOptions::default());
//! transport.publish("orders", br#"{"job":"urn:x","attempts":0}"#).await?;
//! let delivery = transport.pop("orders", Duration::ZERO).await?.expect("a record");
//! transport.ack(&delivery).await?;
//! assert_eq!(kafka.committed("babelqueue", "orders", 0), Some(1));
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::TransportErrorKind;
use tokio::sync::Notify;

use crate::client::{
    KafkaClient, KafkaConsumer, KafkaProducer, KafkaReader, OutRecord, PartitionBounds, Record,
    RevokeHook, TimestampType, TopicPartition,
};
use crate::error::KafkaError;

#[derive(Debug, Default)]
struct State {
    topics: BTreeMap<String, Vec<Vec<Record>>>,
    committed: HashMap<(String, TopicPartition), i64>,
    commits: Vec<(String, TopicPartition, i64)>,
    seeks: Vec<(TopicPartition, i64)>,
    failing: HashSet<String>,
    failing_commits: bool,
    refusing_credentials: bool,
    failing_polls: Option<TransportErrorKind>,
    clock_ms: i64,
    write_delay: Duration,
    events: Vec<String>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    arrived: Notify,
}

/// The in-memory Kafka. Clones share the cluster.
#[derive(Debug, Clone, Default)]
pub struct FakeKafka {
    shared: Arc<Shared>,
    consumers: Arc<Mutex<Vec<Arc<FakeConsumer>>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakeKafka {
    /// An empty cluster.
    pub fn new() -> FakeKafka {
        FakeKafka::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.shared.state)
    }

    /// Creates `topic` with `partitions` partitions (no-op when it exists).
    pub fn create_topic(&self, topic: &str, partitions: usize) {
        self.state()
            .topics
            .entry(topic.to_owned())
            .or_insert_with(|| vec![Vec::new(); partitions.max(1)]);
    }

    /// Appends a record as a producer would (partition 0 unless `partition` says otherwise),
    /// returning its offset. The record's own topic, partition and offset fields are ignored.
    pub fn append(&self, topic: &str, partition: i32, mut record: Record) -> i64 {
        let offset = {
            let mut state = self.state();
            let parts = state
                .topics
                .entry(topic.to_owned())
                .or_insert_with(|| vec![Vec::new()]);
            let index = usize::try_from(partition).unwrap_or(0);
            while parts.len() <= index {
                parts.push(Vec::new());
            }
            let log = &mut parts[index];
            let offset = i64::try_from(log.len()).unwrap_or(i64::MAX);
            record.topic = topic.to_owned();
            record.partition = partition;
            record.offset = offset;
            log.push(record);
            offset
        };
        self.shared.arrived.notify_waiters();
        offset
    }

    /// Every record of `topic`, partition by partition, in offset order.
    pub fn records(&self, topic: &str) -> Vec<Record> {
        self.state()
            .topics
            .get(topic)
            .map(|parts| parts.iter().flatten().cloned().collect())
            .unwrap_or_default()
    }

    /// The topics that hold at least one record.
    pub fn topics_written(&self) -> Vec<String> {
        self.state()
            .topics
            .iter()
            .filter(|(_, parts)| parts.iter().any(|p| !p.is_empty()))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The committed position of `group` on `topic[partition]`.
    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        self.state()
            .committed
            .get(&(group.to_owned(), TopicPartition::new(topic, partition)))
            .copied()
    }

    /// Every commit, in order: (group, partition, position).
    pub fn commits(&self) -> Vec<(String, TopicPartition, i64)> {
        self.state().commits.clone()
    }

    /// Every seek, in order.
    pub fn seeks(&self) -> Vec<(TopicPartition, i64)> {
        self.state().seeks.clone()
    }

    /// Every confirmed write, commit and seek, in order: `write <topic>`,
    /// `commit <topic>[<partition>]@<position>`, `seek <topic>[<partition>]@<offset>`.
    pub fn events(&self) -> Vec<String> {
        self.state().events.clone()
    }

    /// Delays every delivery report by `delay` (the write lands, and is confirmed, only then).
    pub fn set_write_delay(&self, delay: Duration) {
        self.state().write_delay = delay;
    }

    /// Makes every write to `topic` fail (`true`) or succeed again (`false`).
    pub fn fail_writes_to(&self, topic: &str, fail: bool) {
        let mut state = self.state();
        if fail {
            state.failing.insert(topic.to_owned());
        } else {
            state.failing.remove(topic);
        }
    }

    /// Makes every commit fail (`true`) or succeed again (`false`).
    pub fn fail_commits(&self, fail: bool) {
        self.state().failing_commits = fail;
    }

    /// Makes every write and poll fail as a broker that refuses the credentials does
    /// ([`KafkaError::Auth`]) (`true`), or accept them again (`false`).
    pub fn refuse_credentials(&self, refuse: bool) {
        self.state().refusing_credentials = refuse;
    }

    /// Makes every poll fail with an error of `kind` (`Some`), or work again (`None`).
    pub fn fail_polls(&self, kind: Option<TransportErrorKind>) {
        self.state().failing_polls = kind;
    }

    fn refused(&self) -> Result<(), KafkaError> {
        if self.state().refusing_credentials {
            return Err(KafkaError::Auth {
                brokers: "fake:9092".into(),
                reason:
                    "SASL authentication error: Authentication failed: Invalid username or password"
                        .into(),
            });
        }
        Ok(())
    }

    /// Sets the broker clock (epoch ms) stamped on records written without a timestamp
    /// (0, the default, leaves them without one).
    pub fn set_clock_ms(&self, now_ms: i64) {
        self.state().clock_ms = now_ms;
    }

    /// The consumers created so far.
    pub fn consumers(&self) -> Vec<Arc<FakeConsumer>> {
        lock(&self.consumers).clone()
    }
}

impl KafkaClient for FakeKafka {
    fn producer(&self) -> Result<Arc<dyn KafkaProducer>, KafkaError> {
        Ok(Arc::new(FakeProducer {
            kafka: self.clone(),
        }))
    }

    fn consumer(
        &self,
        group_id: &str,
        topics: &[String],
        on_revoke: RevokeHook,
    ) -> Result<Arc<dyn KafkaConsumer>, KafkaError> {
        let consumer = Arc::new(FakeConsumer {
            kafka: self.clone(),
            group: group_id.to_owned(),
            topics: topics.to_vec(),
            positions: Mutex::new(HashMap::new()),
            paused: Mutex::new(HashSet::new()),
            revoked: Mutex::new(HashSet::new()),
            on_revoke,
        });
        lock(&self.consumers).push(consumer.clone());
        Ok(consumer)
    }

    fn reader(&self, group_id: &str) -> Result<Box<dyn KafkaReader>, KafkaError> {
        Ok(Box::new(FakeReader {
            kafka: self.clone(),
            group: group_id.to_owned(),
        }))
    }
}

/// The fake reader: a browse that sees a group's committed positions and changes nothing.
#[derive(Debug)]
pub struct FakeReader {
    kafka: FakeKafka,
    group: String,
}

impl KafkaReader for FakeReader {
    fn bounds(&self, topic: &str) -> Result<Vec<PartitionBounds>, KafkaError> {
        self.kafka.refused()?;
        let state = self.kafka.state();
        let Some(parts) = state.topics.get(topic) else {
            return Ok(Vec::new());
        };
        Ok(parts
            .iter()
            .enumerate()
            .map(|(index, log)| {
                let partition =
                    TopicPartition::new(topic, i32::try_from(index).unwrap_or(i32::MAX));
                let committed = state
                    .committed
                    .get(&(self.group.clone(), partition.clone()))
                    .copied();
                PartitionBounds {
                    partition,
                    low: 0,
                    high: i64::try_from(log.len()).unwrap_or(i64::MAX),
                    committed,
                }
            })
            .collect())
    }

    fn read(
        &self,
        partition: &TopicPartition,
        from: i64,
        to: i64,
        max: usize,
    ) -> Result<Vec<Record>, KafkaError> {
        self.kafka.refused()?;
        let state = self.kafka.state();
        let log = usize::try_from(partition.partition)
            .ok()
            .and_then(|index| state.topics.get(&partition.topic)?.get(index));
        Ok(log
            .map(|log| {
                log.iter()
                    .filter(|r| r.offset >= from && r.offset < to)
                    .take(max)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// The fake producer: a write is appended to partition 0 of its topic at once.
#[derive(Debug)]
pub struct FakeProducer {
    kafka: FakeKafka,
}

#[async_trait]
impl KafkaProducer for FakeProducer {
    async fn send(&self, record: OutRecord, _timeout: Duration) -> Result<(), KafkaError> {
        self.kafka.refused()?;
        let delay = self.kafka.state().write_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let clock = {
            let mut state = self.kafka.state();
            if state.failing.contains(&record.topic) {
                return Err(KafkaError::Injected {
                    kind: TransportErrorKind::Connection,
                    message: format!("writing to {:?}", record.topic),
                });
            }
            state.events.push(format!("write {}", record.topic));
            state.clock_ms
        };
        let timestamp = record.timestamp.or((clock > 0).then_some(clock));
        self.kafka.append(
            &record.topic,
            0,
            Record {
                topic: record.topic.clone(),
                partition: 0,
                offset: 0,
                key: record.key,
                value: Some(record.value),
                headers: record.headers,
                timestamp,
                timestamp_type: TimestampType::CreateTime,
            },
        );
        Ok(())
    }

    /// One `send many` event, then each record as [`send`](KafkaProducer::send) writes it.
    async fn send_many(
        &self,
        records: Vec<OutRecord>,
        timeout: Duration,
    ) -> Vec<Result<(), KafkaError>> {
        self.kafka
            .state()
            .events
            .push(format!("send many {}", records.len()));
        let mut outcomes = Vec::with_capacity(records.len());
        for record in records {
            outcomes.push(self.send(record, timeout).await);
        }
        outcomes
    }

    async fn flush(&self, _timeout: Duration) -> Result<(), KafkaError> {
        Ok(())
    }
}

/// A fake group consumer: it owns every partition of its topics.
pub struct FakeConsumer {
    kafka: FakeKafka,
    group: String,
    topics: Vec<String>,
    positions: Mutex<HashMap<TopicPartition, i64>>,
    paused: Mutex<HashSet<TopicPartition>>,
    revoked: Mutex<HashSet<TopicPartition>>,
    on_revoke: RevokeHook,
}

impl fmt::Debug for FakeConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeConsumer")
            .field("group", &self.group)
            .field("topics", &self.topics)
            .finish_non_exhaustive()
    }
}

impl FakeConsumer {
    /// Simulates a rebalance taking `partitions` away: the hook hears about it and the
    /// consumer stops fetching them.
    pub fn revoke(&self, partitions: &[TopicPartition]) {
        lock(&self.revoked).extend(partitions.iter().cloned());
        // As the librdkafka client: the positions still owed a commit are committed at once.
        for (tp, next) in (self.on_revoke)(partitions) {
            let mut state = self.kafka.state();
            state
                .committed
                .insert((self.group.clone(), tp.clone()), next);
            state.commits.push((self.group.clone(), tp.clone(), next));
            state.events.push(format!("commit on revoke {tp}@{next}"));
        }
    }

    /// The partitions currently paused.
    pub fn paused(&self) -> Vec<TopicPartition> {
        let mut paused: Vec<TopicPartition> = lock(&self.paused).iter().cloned().collect();
        paused.sort();
        paused
    }

    fn take(&self) -> Option<Record> {
        let state = self.kafka.state();
        let mut positions = lock(&self.positions);
        let paused = lock(&self.paused);
        let revoked = lock(&self.revoked);
        for topic in &self.topics {
            let Some(parts) = state.topics.get(topic) else {
                continue;
            };
            for (index, log) in parts.iter().enumerate() {
                let tp = TopicPartition::new(topic.clone(), i32::try_from(index).unwrap_or(0));
                if paused.contains(&tp) || revoked.contains(&tp) {
                    continue;
                }
                let position = positions.entry(tp.clone()).or_insert_with(|| {
                    state
                        .committed
                        .get(&(self.group.clone(), tp.clone()))
                        .copied()
                        .unwrap_or(0)
                });
                if let Some(record) = usize::try_from(*position).ok().and_then(|p| log.get(p)) {
                    *position += 1;
                    return Some(record.clone());
                }
            }
        }
        None
    }
}

#[async_trait]
impl KafkaConsumer for FakeConsumer {
    async fn poll(&self, timeout: Duration) -> Result<Option<Record>, KafkaError> {
        self.kafka.refused()?;
        if let Some(kind) = self.kafka.state().failing_polls {
            return Err(KafkaError::Injected {
                kind,
                message: format!("polling {:?}", self.topics),
            });
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.kafka.shared.arrived.notified();
            if let Some(record) = self.take() {
                return Ok(Some(record));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::select! {
                () = arrived => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    async fn commit(&self, partition: &TopicPartition, next_offset: i64) -> Result<(), KafkaError> {
        let mut state = self.kafka.state();
        if state.failing_commits {
            return Err(KafkaError::Injected {
                kind: TransportErrorKind::Connection,
                message: format!("committing {partition}@{next_offset}"),
            });
        }
        state
            .committed
            .insert((self.group.clone(), partition.clone()), next_offset);
        state
            .commits
            .push((self.group.clone(), partition.clone(), next_offset));
        state
            .events
            .push(format!("commit {partition}@{next_offset}"));
        Ok(())
    }

    async fn seek(&self, partition: &TopicPartition, offset: i64) -> Result<(), KafkaError> {
        {
            let mut state = self.kafka.state();
            state.seeks.push((partition.clone(), offset));
            state.events.push(format!("seek {partition}@{offset}"));
        }
        lock(&self.positions).insert(partition.clone(), offset);
        self.kafka.shared.arrived.notify_waiters();
        Ok(())
    }

    fn pause(&self, partition: &TopicPartition) -> Result<(), KafkaError> {
        lock(&self.paused).insert(partition.clone());
        Ok(())
    }

    fn resume(&self, partition: &TopicPartition) -> Result<(), KafkaError> {
        lock(&self.paused).remove(partition);
        self.kafka.shared.arrived.notify_waiters();
        Ok(())
    }

    async fn close(&self) {}
}
