//! The librdkafka side of browsing: a consumer that is assigned partitions (it never
//! subscribes, so it never joins the group), reads the group's committed positions, and
//! neither commits nor stores an offset.

use std::fmt;
use std::time::{Duration, Instant};

use babelqueue_core::TransportErrorKind;
use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError as RdError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use crate::client::{KafkaReader, PartitionBounds, Record, TopicPartition};
use crate::error::KafkaError;
use crate::rd::{RdContext, owned};

/// Options the browsing consumer always gets, whatever the URL says.
pub(crate) const READER_OPTIONS: [(&str, &str); 5] = [
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
    ("enable.partition.eof", "true"),
    ("allow.auto.create.topics", "false"),
    ("auto.offset.reset", "earliest"),
];

/// How long a metadata, watermark or committed-offset request waits, and how long a read
/// waits for the next record before it gives up short of the end.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// One poll's wait inside a read.
const POLL_STEP: Duration = Duration::from_millis(200);

pub(crate) struct RdReader {
    consumer: BaseConsumer<RdContext>,
}

impl fmt::Debug for RdReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RdReader").finish_non_exhaustive()
    }
}

impl RdReader {
    pub(crate) fn new(consumer: BaseConsumer<RdContext>) -> RdReader {
        RdReader { consumer }
    }
}

impl KafkaReader for RdReader {
    fn bounds(&self, topic: &str) -> Result<Vec<PartitionBounds>, KafkaError> {
        let metadata = self
            .consumer
            .fetch_metadata(Some(topic), READ_TIMEOUT)
            .map_err(KafkaError::client("read a topic's metadata"))?;
        let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Ok(Vec::new());
        };
        if let Some(error) = found.error() {
            let code = RDKafkaErrorCode::from(error);
            if code == RDKafkaErrorCode::UnknownTopicOrPartition {
                return Ok(Vec::new());
            }
            return Err(KafkaError::Client {
                operation: "read a topic's metadata",
                source: RdError::MetadataFetch(code),
            });
        }
        let mut ids: Vec<i32> = found.partitions().iter().map(|p| p.id()).collect();
        ids.sort_unstable();
        let mut list = TopicPartitionList::new();
        for id in &ids {
            list.add_partition(topic, *id);
        }
        let committed = self
            .consumer
            .committed_offsets(list, READ_TIMEOUT)
            .map_err(KafkaError::client("read the group's committed offsets"))?;
        let mut bounds = Vec::with_capacity(ids.len());
        for id in ids {
            let (low, high) = self
                .consumer
                .fetch_watermarks(topic, id, READ_TIMEOUT)
                .map_err(KafkaError::client("read a partition's watermarks"))?;
            let committed = committed
                .find_partition(topic, id)
                .and_then(|e| match e.offset() {
                    Offset::Offset(o) if o >= 0 => Some(o),
                    _ => None,
                });
            bounds.push(PartitionBounds {
                partition: TopicPartition::new(topic, id),
                low,
                high,
                committed,
            });
        }
        Ok(bounds)
    }

    fn read(
        &self,
        partition: &TopicPartition,
        from: i64,
        to: i64,
        max: usize,
    ) -> Result<Vec<Record>, KafkaError> {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&partition.topic, partition.partition, Offset::Offset(from))
            .map_err(KafkaError::client("build a partition list"))?;
        self.consumer
            .assign(&list)
            .map_err(KafkaError::client("assign a partition to browse"))?;
        let read = self.read_assigned(partition, from, to, max);
        if let Err(e) = self.consumer.unassign() {
            tracing::debug!(target: "babelqueue::kafka", partition = %partition, error = %e,
                "Unassigning the browsed partition failed; the reader is dropped anyway");
        }
        read
    }
}

impl RdReader {
    fn read_assigned(
        &self,
        partition: &TopicPartition,
        from: i64,
        to: i64,
        max: usize,
    ) -> Result<Vec<Record>, KafkaError> {
        let mut records = Vec::new();
        let mut reached = from;
        let mut waited_since = Instant::now();
        let mut last_error = None;
        while records.len() < max && reached < to {
            if waited_since.elapsed() >= READ_TIMEOUT {
                return Err(KafkaError::BrowseIncomplete {
                    topic: partition.topic.clone(),
                    partition: partition.partition,
                    reached,
                    end: to,
                    reason: last_error
                        .unwrap_or_else(|| format!("no record came within {READ_TIMEOUT:?}")),
                });
            }
            match self.consumer.poll(POLL_STEP) {
                None => {}
                Some(Ok(message)) => {
                    if message.topic() != partition.topic
                        || message.partition() != partition.partition
                    {
                        continue;
                    }
                    if message.offset() >= to {
                        break;
                    }
                    reached = message.offset().saturating_add(1);
                    waited_since = Instant::now();
                    records.push(owned(&message));
                }
                Some(Err(RdError::PartitionEOF(_))) => break,
                Some(Err(e)) => {
                    let error = KafkaError::Client {
                        operation: "browse",
                        source: e,
                    };
                    if matches!(
                        error.kind(),
                        TransportErrorKind::Auth | TransportErrorKind::Config
                    ) {
                        return Err(error);
                    }
                    last_error = Some(error.to_string());
                }
            }
        }
        Ok(records)
    }
}
