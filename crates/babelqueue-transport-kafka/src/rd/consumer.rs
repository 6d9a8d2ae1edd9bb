//! The librdkafka group consumer ([`RdConsumer`]): subscribing, receiving records in place,
//! committing, seeking, and the records' headers and timestamps as the client contract reads them.

use super::*;

/// A librdkafka group consumer.
pub(crate) struct RdConsumer {
    pub(super) consumer: Mutex<Option<Arc<StreamConsumer<RdContext>>>>,
    pub(super) topics: Vec<String>,
    pub(super) auth: Arc<AuthWatch>,
}

impl fmt::Debug for RdConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RdConsumer")
            .field("topics", &self.topics)
            .finish_non_exhaustive()
    }
}

impl RdConsumer {
    fn get(&self) -> Result<Arc<StreamConsumer<RdContext>>, KafkaError> {
        self.consumer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| KafkaError::Config("the consumer is closed".into()))
    }

    fn list(
        partition: &TopicPartition,
        offset: Option<i64>,
    ) -> Result<TopicPartitionList, KafkaError> {
        let mut list = TopicPartitionList::new();
        match offset {
            Some(o) => list
                .add_partition_offset(&partition.topic, partition.partition, Offset::Offset(o))
                .map_err(KafkaError::client("build a partition list"))?,
            None => {
                list.add_partition(&partition.topic, partition.partition);
            }
        }
        Ok(list)
    }

    /// The next record of `consumer`, passing over librdkafka's informational errors.
    ///
    /// librdkafka puts its errors on the consumer queue as events, in line with the records: a
    /// broker that is down queues one for each failed reconnection (`_TRANSPORT`, and
    /// `_ALL_BROKERS_DOWN` each time it re-bootstraps, up to several a second), ahead of the
    /// rebalance and the records that come once the broker is back. None of them needs an
    /// answer (librdkafka reconnects, rejoins and fetches by itself), so they are logged and
    /// the queue is read on: a caller that waited out its poll for each one fell further
    /// behind the queue with every second of an outage, and a worker stayed wedged for minutes
    /// after the broker was back (`kafka/broker-restart` in the chaos suite). A refusal of the
    /// credentials and an error librdkafka calls fatal are returned at once: neither heals.
    /// The record is handed to `keep` where librdkafka holds it; what `keep` returns is
    /// returned.
    async fn next_record<T>(
        &self,
        consumer: &StreamConsumer<RdContext>,
        mut keep: impl FnMut(&BorrowedMessage<'_>) -> T,
    ) -> Result<T, KafkaError> {
        let mut skipped = 0usize;
        loop {
            let error = match consumer.recv().await {
                Ok(message) => {
                    if skipped > 0 {
                        tracing::debug!(target: "babelqueue::kafka", topics = ?self.topics, skipped,
                            "Kafka poll passed over librdkafka's errors before this record");
                    }
                    return Ok(keep(&message));
                }
                Err(source) => self.auth.explain(KafkaError::Client {
                    operation: "poll",
                    source,
                }),
            };
            if !recovers_by_itself(&error) || skipped >= SKIP_LIMIT {
                return Err(error);
            }
            if skipped == 0 {
                tracing::warn!(target: "babelqueue::kafka", topics = ?self.topics, error = %error,
                    "Kafka poll reported an error; librdkafka recovers by itself, polling on");
            } else {
                tracing::debug!(target: "babelqueue::kafka", topics = ?self.topics, error = %error, skipped,
                    "Kafka poll reported another error; polling on");
            }
            skipped += 1;
        }
    }

    /// The next record, waiting up to `timeout`, handed to `keep`: the credential watch (a
    /// refusal ends the wait with it) and the recovery from librdkafka's errors around
    /// [`next_record`](RdConsumer::next_record). `None` when no record came.
    async fn poll_with<T>(
        &self,
        consumer: &StreamConsumer<RdContext>,
        timeout: Duration,
        keep: impl FnMut(&BorrowedMessage<'_>) -> T,
    ) -> Result<Option<T>, KafkaError> {
        let changes = self.auth.subscribe();
        if let Some(refused) = self.auth.current() {
            return Err(refused);
        }
        let received = tokio::select! {
            received = tokio::time::timeout(timeout, self.next_record(consumer, keep)) => received,
            refused = self.auth.next_refusal(changes) => return Err(refused),
        };
        match received {
            Err(_) => Ok(None),
            Ok(Ok(kept)) => {
                self.auth.accepted();
                Ok(Some(kept))
            }
            Ok(Err(error)) => Err(error),
        }
    }
}

/// Whether librdkafka recovers from a consumer error by itself (a broker that is down, a
/// rebalance, a fetch error): every error but a refusal of the credentials and a consumer it
/// gave up on (a fatal error, a fenced static member), which polling again does not heal.
fn recovers_by_itself(error: &KafkaError) -> bool {
    !matches!(
        error.kind(),
        babelqueue_core::TransportErrorKind::Auth | babelqueue_core::TransportErrorKind::Config
    )
}

/// A record's headers where librdkafka holds them (parsed by librdkafka on first read).
struct RdHeaders<'a>(Option<&'a BorrowedHeaders>);

impl RecordHeaders for RdHeaders<'_> {
    fn first_named(&self, name: &str) -> Option<Option<&[u8]>> {
        let headers = self.0?;
        (0..headers.count())
            .filter_map(|i| headers.try_get(i))
            .find(|h| h.key == name)
            .map(|h| h.value)
    }

    fn each<'s>(&'s self, each: &mut dyn FnMut(&'s str, Option<&'s [u8]>)) {
        if let Some(headers) = self.0 {
            for h in headers.iter() {
                each(h.key, h.value);
            }
        }
    }
}

/// A record's timestamp in epoch milliseconds (none when librdkafka has none, or a negative
/// one), and what it is.
fn timestamp_of(timestamp: Timestamp) -> (Option<i64>, TimestampType) {
    let (ms, kind) = match timestamp {
        Timestamp::NotAvailable => (None, TimestampType::CreateTime),
        Timestamp::CreateTime(ms) => (Some(ms), TimestampType::CreateTime),
        Timestamp::LogAppendTime(ms) => (Some(ms), TimestampType::LogAppendTime),
    };
    (ms.filter(|ms| *ms >= 0), kind)
}

/// Calls `f` with `message` lent as a [`LentRecord`].
fn lend<T>(message: &BorrowedMessage<'_>, f: impl FnOnce(LentRecord<'_>) -> T) -> T {
    let headers = RdHeaders(message.headers());
    let (timestamp, timestamp_type) = timestamp_of(message.timestamp());
    f(LentRecord {
        topic: message.topic(),
        partition: message.partition(),
        offset: message.offset(),
        key: message.key(),
        value: message.payload(),
        headers: &headers,
        timestamp,
        timestamp_type,
    })
}

/// `message`, owned (every field copied).
pub(crate) fn owned(message: &BorrowedMessage<'_>) -> Record {
    lend(message, |record| record.to_record())
}

#[async_trait]
impl KafkaConsumer for RdConsumer {
    async fn poll(&self, timeout: Duration) -> Result<Option<Record>, KafkaError> {
        let consumer = self.get()?;
        self.poll_with(&consumer, timeout, owned).await
    }

    /// The first record through [`poll`](KafkaConsumer::poll) (its timeout, the credential
    /// watch, the recovery from librdkafka's errors); the rest straight from what the
    /// consumer has fetched, without a timer, a watch or a wait each. An error there ends the
    /// batch (a refusal of the credentials is recorded by the client's callbacks, and the next
    /// poll reports it).
    async fn poll_batch(&self, max: usize, timeout: Duration) -> Result<Vec<Record>, KafkaError> {
        let mut records = Vec::new();
        self.poll_batch_lent(max, timeout, &mut |record| {
            // Sized once (a batch is at most the loop's prefetch; the cap bounds an unusual one).
            if records.is_empty() {
                records.reserve_exact(max.clamp(1, 1024));
            }
            records.push(record.to_record());
        })
        .await?;
        Ok(records)
    }

    /// As [`poll_batch`](KafkaConsumer::poll_batch), each record lent where librdkafka holds
    /// it: only what `each` keeps is copied (librdkafka's header list is read in place).
    async fn poll_batch_lent(
        &self,
        max: usize,
        timeout: Duration,
        each: &mut (dyn for<'r> FnMut(LentRecord<'r>) + Send),
    ) -> Result<usize, KafkaError> {
        use futures_util::FutureExt as _;
        let consumer = self.get()?;
        if self
            .poll_with(&consumer, timeout, |message| lend(message, &mut *each))
            .await?
            .is_none()
        {
            return Ok(0);
        }
        let mut lent = 1;
        while lent < max {
            match consumer.recv().now_or_never() {
                Some(Ok(message)) => lend(&message, &mut *each),
                Some(Err(_)) | None => break,
            }
            lent += 1;
        }
        Ok(lent)
    }

    async fn commit(&self, partition: &TopicPartition, next_offset: i64) -> Result<(), KafkaError> {
        let consumer = self.get()?;
        let list = RdConsumer::list(partition, Some(next_offset))?;
        tokio::task::spawn_blocking(move || consumer.commit(&list, CommitMode::Sync))
            .await
            .map_err(|e| KafkaError::Config(format!("the commit task failed: {e}")))?
            .map_err(|e| self.auth.explain(KafkaError::client("commit")(e)))?;
        self.auth.accepted();
        Ok(())
    }

    async fn seek(&self, partition: &TopicPartition, offset: i64) -> Result<(), KafkaError> {
        let consumer = self.get()?;
        let tp = partition.clone();
        tokio::task::spawn_blocking(move || {
            consumer.seek(
                &tp.topic,
                tp.partition,
                Offset::Offset(offset),
                SEEK_TIMEOUT,
            )
        })
        .await
        .map_err(|e| KafkaError::Config(format!("the seek task failed: {e}")))?
        .map_err(|e| KafkaError::Seek {
            topic: partition.topic.clone(),
            partition: partition.partition,
            offset,
            reason: e.to_string(),
        })
    }

    fn pause(&self, partition: &TopicPartition) -> Result<(), KafkaError> {
        self.get()?
            .pause(&RdConsumer::list(partition, None)?)
            .map_err(KafkaError::client("pause"))
    }

    fn resume(&self, partition: &TopicPartition) -> Result<(), KafkaError> {
        self.get()?
            .resume(&RdConsumer::list(partition, None)?)
            .map_err(KafkaError::client("resume"))
    }

    async fn close(&self) {
        let taken = self
            .consumer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(consumer) = taken {
            // Dropping the last handle leaves the group; librdkafka blocks while it does.
            let _ = tokio::task::spawn_blocking(move || {
                consumer.unsubscribe();
                drop(consumer);
            })
            .await;
        }
    }
}
