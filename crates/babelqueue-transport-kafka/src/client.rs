//! The client seam: the few Kafka operations the transport and the re-injector need, as
//! traits, so they run against librdkafka ([`RdKafkaClient`](crate::RdKafkaClient)) or an
//! in-memory fake (the `fake` feature) alike.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::KafkaError;

/// A topic partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic[partition]`.
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.topic, self.partition)
    }
}

/// One record header. Kafka allows repeated keys and a null value, which is not an empty one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// The key: the binding's own `bq-*` names are static text (see
    /// [`header_key`](crate::projection::header_key)), so reading and writing them allocates
    /// nothing.
    pub key: Cow<'static, str>,
    /// The value (`None`: a null value).
    pub value: Option<Vec<u8>>,
}

impl RecordHeader {
    /// A header with a UTF-8 text value.
    pub fn text(key: impl Into<Cow<'static, str>>, value: impl Into<String>) -> RecordHeader {
        RecordHeader {
            key: key.into(),
            value: Some(value.into().into_bytes()),
        }
    }
}

/// What a record's timestamp is: Kafka's `message.timestamp.type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// Set by the producer (`CreateTime`, the default of a topic).
    #[default]
    CreateTime,
    /// Set by the broker when it appended the record (`LogAppendTime`).
    LogAppendTime,
}

impl TimestampType {
    /// Kafka's name of it: `CreateTime` or `LogAppendTime`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// A consumed record, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its topic.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its key (`None`: a null key; an empty key is `Some(vec![])`).
    pub key: Option<Vec<u8>>,
    /// Its value (`None`: a null value, a tombstone).
    pub value: Option<Vec<u8>>,
    /// Its headers, in order.
    pub headers: Vec<RecordHeader>,
    /// Its timestamp in epoch milliseconds (create or log-append time), when it has one.
    pub timestamp: Option<i64>,
    /// What its timestamp is (meaningless without one).
    pub timestamp_type: TimestampType,
}

impl Record {
    /// Its topic partition.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }

    /// The record lent, as [`KafkaConsumer::poll_batch_lent`] hands records out.
    pub fn lend(&self) -> LentRecord<'_> {
        LentRecord {
            topic: &self.topic,
            partition: self.partition,
            offset: self.offset,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            headers: &self.headers,
            timestamp: self.timestamp,
            timestamp_type: self.timestamp_type,
        }
    }
}

/// A record's headers, read in place: a record's own `Vec<RecordHeader>`, or the client's
/// buffer of a record it lends ([`LentRecord`]) without copying each header out first.
pub trait RecordHeaders: Sync {
    /// The first header named `name`: `None` when absent, `Some(None)` when its value is null.
    fn first_named(&self, name: &str) -> Option<Option<&[u8]>>;

    /// Calls `each` with every header's key and value, in order.
    fn each<'s>(&'s self, each: &mut dyn FnMut(&'s str, Option<&'s [u8]>));
}

impl RecordHeaders for [RecordHeader] {
    fn first_named(&self, name: &str) -> Option<Option<&[u8]>> {
        self.iter()
            .find(|h| h.key == name)
            .map(|h| h.value.as_deref())
    }

    fn each<'s>(&'s self, each: &mut dyn FnMut(&'s str, Option<&'s [u8]>)) {
        for h in self {
            each(&h.key, h.value.as_deref());
        }
    }
}

impl<const N: usize> RecordHeaders for [RecordHeader; N] {
    fn first_named(&self, name: &str) -> Option<Option<&[u8]>> {
        self.as_slice().first_named(name)
    }

    fn each<'s>(&'s self, each: &mut dyn FnMut(&'s str, Option<&'s [u8]>)) {
        self.as_slice().each(each);
    }
}

impl RecordHeaders for Vec<RecordHeader> {
    fn first_named(&self, name: &str) -> Option<Option<&[u8]>> {
        self.as_slice().first_named(name)
    }

    fn each<'s>(&'s self, each: &mut dyn FnMut(&'s str, Option<&'s [u8]>)) {
        self.as_slice().each(each);
    }
}

/// A consumed record lent for the time of one call (see [`KafkaConsumer::poll_batch_lent`]):
/// the fields of a [`Record`], borrowed from wherever the client holds them.
#[derive(Clone, Copy)]
pub struct LentRecord<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its key (`None`: a null key).
    pub key: Option<&'a [u8]>,
    /// Its value (`None`: a null value, a tombstone).
    pub value: Option<&'a [u8]>,
    /// Its headers, in order.
    pub headers: &'a dyn RecordHeaders,
    /// Its timestamp in epoch milliseconds, when it has one.
    pub timestamp: Option<i64>,
    /// What its timestamp is (meaningless without one).
    pub timestamp_type: TimestampType,
}

impl fmt::Debug for LentRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LentRecord")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl LentRecord<'_> {
    /// The record, owned (every field copied).
    pub fn to_record(&self) -> Record {
        let mut headers = Vec::new();
        self.headers.each(&mut |key, value| {
            headers.push(RecordHeader {
                key: crate::projection::header_key(key),
                value: value.map(<[u8]>::to_vec),
            });
        });
        Record {
            topic: self.topic.to_owned(),
            partition: self.partition,
            offset: self.offset,
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            headers,
            timestamp: self.timestamp,
            timestamp_type: self.timestamp_type,
        }
    }
}

/// A record to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutRecord {
    /// The topic.
    pub topic: String,
    /// The key (`None`: a null key).
    pub key: Option<Vec<u8>>,
    /// The value.
    pub value: Vec<u8>,
    /// The headers, in order.
    pub headers: Vec<RecordHeader>,
    /// The create timestamp in epoch milliseconds (`None`: the broker or client sets it).
    pub timestamp: Option<i64>,
}

/// Writes records and waits for each one's delivery report.
#[async_trait]
pub trait KafkaProducer: Send + Sync + fmt::Debug {
    /// Writes `record` and returns once the broker confirmed it; a delivery error, or no
    /// report within `timeout`, is an error (nothing may be committed then).
    async fn send(&self, record: OutRecord, timeout: Duration) -> Result<(), KafkaError>;

    /// Writes every record of `records` in order, keeping up to [`PRODUCE_WINDOW`] of them in
    /// flight instead of waiting for each delivery report before the next write, and returns
    /// each record's outcome (same order and length). The default sends them one by one.
    async fn send_many(
        &self,
        records: Vec<OutRecord>,
        timeout: Duration,
    ) -> Vec<Result<(), KafkaError>> {
        let mut outcomes = Vec::with_capacity(records.len());
        for record in records {
            outcomes.push(self.send(record, timeout).await);
        }
        outcomes
    }

    /// Writes `count` records as [`send_many`](KafkaProducer::send_many) does, record `i` made
    /// by `make(i)` only when its turn to be written comes: a batch of any size holds one
    /// record at a time on this side (librdkafka keeps its own copy of each until its report).
    /// The default makes them all first and calls `send_many`.
    async fn send_made(
        &self,
        count: usize,
        make: &(dyn Fn(usize) -> OutRecord + Send + Sync),
        timeout: Duration,
    ) -> Vec<Result<(), KafkaError>> {
        self.send_many((0..count).map(make).collect(), timeout)
            .await
    }

    /// Waits for every queued write to be delivered, up to `timeout`.
    async fn flush(&self, timeout: Duration) -> Result<(), KafkaError>;
}

/// The most records [`KafkaProducer::send_many`] keeps in flight (written, delivery report not
/// in yet) at once.
pub const PRODUCE_WINDOW: usize = 8192;

/// A group consumer of a fixed set of topics, with manual commits.
#[async_trait]
pub trait KafkaConsumer: Send + Sync + fmt::Debug {
    /// The next record, waiting up to `timeout`; `None` when none came.
    async fn poll(&self, timeout: Duration) -> Result<Option<Record>, KafkaError>;

    /// The next records, up to `max`: the first waits up to `timeout`, the others are only
    /// those already at hand. Empty when none came; an error only when the first poll fails (a
    /// later one ends the batch, and the next poll meets it again).
    ///
    /// The default polls one record at a time; a client that can read what it has fetched
    /// more cheaply than a full poll per record overrides it.
    async fn poll_batch(&self, max: usize, timeout: Duration) -> Result<Vec<Record>, KafkaError> {
        let Some(first) = self.poll(timeout).await? else {
            return Ok(Vec::new());
        };
        let mut records = vec![first];
        while records.len() < max {
            match self.poll(Duration::ZERO).await {
                Ok(Some(record)) => records.push(record),
                Ok(None) | Err(_) => break,
            }
        }
        Ok(records)
    }

    /// The same records as [`poll_batch`](KafkaConsumer::poll_batch), each lent to `each` in
    /// turn instead of returned owned; returns how many there were. A client that holds what
    /// it fetched (librdkafka) overrides it so that nothing is copied out of a record but what
    /// `each` keeps; the default lends the records of `poll_batch`.
    ///
    /// Once a record was lent it counts as received: an error reading a later one ends the
    /// batch with the records lent so far, as for `poll_batch`.
    async fn poll_batch_lent(
        &self,
        max: usize,
        timeout: Duration,
        each: &mut (dyn for<'r> FnMut(LentRecord<'r>) + Send),
    ) -> Result<usize, KafkaError> {
        let records = self.poll_batch(max, timeout).await?;
        for record in &records {
            each(record.lend());
        }
        Ok(records.len())
    }

    /// Commits `next_offset` (the offset of the next record to read) for `partition`,
    /// synchronously.
    async fn commit(&self, partition: &TopicPartition, next_offset: i64) -> Result<(), KafkaError>;

    /// Moves the fetch position of `partition` to `offset` (the record comes again).
    async fn seek(&self, partition: &TopicPartition, offset: i64) -> Result<(), KafkaError>;

    /// Stops fetching `partition` (records already fetched may still arrive).
    fn pause(&self, partition: &TopicPartition) -> Result<(), KafkaError>;

    /// Resumes fetching `partition`.
    fn resume(&self, partition: &TopicPartition) -> Result<(), KafkaError>;

    /// Leaves the group and releases the consumer.
    async fn close(&self);
}

/// Called with the partitions a rebalance takes away from a consumer (or that it lost).
/// It returns the positions still owed a commit on those partitions (settled records whose
/// commit was waiting for the commit interval): the client commits them synchronously before
/// the partitions go, so the next owner does not receive those records again.
pub type RevokeHook = Arc<dyn Fn(&[TopicPartition]) -> Vec<(TopicPartition, i64)> + Send + Sync>;

/// One partition as a browse finds it: its watermarks and the group's committed position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionBounds {
    /// The partition.
    pub partition: TopicPartition,
    /// The low watermark (the oldest offset still stored).
    pub low: i64,
    /// The high watermark (the offset the next record written will get).
    pub high: i64,
    /// The group's committed position (the next record it will read), `None` when it has none.
    pub committed: Option<i64>,
}

/// Reads records without consuming them, for `babelqueue dlq list`: it never joins the group
/// (partitions are assigned, not subscribed), never commits and stores no offset, so no member
/// of the group can tell it ran. The calls block (run them off the async runtime).
///
/// [`KafkaTransport`](crate::KafkaTransport)'s [`Browser`](babelqueue_core::Browser) reads
/// through it:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::TransportError> {
/// use std::sync::Arc;
/// use babelqueue_core::Transport;
/// use babelqueue_transport_kafka::{KafkaOptions, KafkaTransport, fake::FakeKafka};
///
/// let kafka = FakeKafka::new();
/// let transport = KafkaTransport::with_client(Arc::new(kafka.clone()), &KafkaOptions::default());
/// transport.publish("orders.dlq", b"not an envelope").await?;
/// let browser = transport.capabilities().browser().expect("Kafka browses");
/// assert_eq!(browser.browse("orders.dlq", 0).await?, [b"not an envelope".to_vec()]);
/// assert_eq!(kafka.committed("babelqueue", "orders.dlq", 0), None); // nothing consumed
/// # Ok(()) }
/// ```
pub trait KafkaReader: Send + fmt::Debug {
    /// Every partition of `topic` in partition order, with the reader's group's committed
    /// positions; empty when the topic does not exist (it is not created).
    fn bounds(&self, topic: &str) -> Result<Vec<PartitionBounds>, KafkaError>;

    /// Up to `max` records of `partition` (`max` > 0) from offset `from` on, in offset order,
    /// stopping before offset `to`.
    fn read(
        &self,
        partition: &TopicPartition,
        from: i64,
        to: i64,
        max: usize,
    ) -> Result<Vec<Record>, KafkaError>;
}

/// Creates the producer and the consumers.
pub trait KafkaClient: Send + Sync + fmt::Debug {
    /// The (shared) producer.
    fn producer(&self) -> Result<Arc<dyn KafkaProducer>, KafkaError>;

    /// A consumer in `group_id`, subscribed to `topics`, with auto-commit off and
    /// `auto.offset.reset=earliest`; `on_revoke` hears about every partition it loses.
    fn consumer(
        &self,
        group_id: &str,
        topics: &[String],
        on_revoke: RevokeHook,
    ) -> Result<Arc<dyn KafkaConsumer>, KafkaError>;

    /// A reader that sees `group_id`'s committed positions without being a member of the
    /// group (see [`KafkaReader`]).
    fn reader(&self, group_id: &str) -> Result<Box<dyn KafkaReader>, KafkaError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::{self, HEADER_ATTEMPTS, HEADER_ORIGINAL_TOPIC, HEADER_SCHEMA_VERSION};

    fn record() -> Record {
        Record {
            topic: "orders".into(),
            partition: 3,
            offset: 41,
            key: Some(Vec::new()),
            value: None,
            headers: vec![
                RecordHeader::text(HEADER_SCHEMA_VERSION, "2"),
                RecordHeader {
                    key: "x-null".into(),
                    value: None,
                },
                RecordHeader::text(HEADER_ATTEMPTS, "4"),
                RecordHeader::text("x-tenant", "acme"),
                RecordHeader::text(HEADER_ATTEMPTS, "9"),
                RecordHeader::text(HEADER_ORIGINAL_TOPIC, "orders"),
                RecordHeader::text(HEADER_SCHEMA_VERSION, "3"),
                RecordHeader::text(HEADER_ORIGINAL_TOPIC, "other"),
            ],
            timestamp: Some(1_749_132_727_000),
            timestamp_type: TimestampType::CreateTime,
        }
    }

    #[test]
    fn a_lent_record_copied_back_is_the_record_field_for_field() {
        let record = record();
        // An empty key stays empty (not null), a null value null, repeated and null headers
        // in place and in order, the binding's own keys static text again.
        let copied = record.lend().to_record();
        assert_eq!(copied, record);
        assert!(matches!(
            copied.headers[0].key,
            Cow::Borrowed(HEADER_SCHEMA_VERSION)
        ));
        assert!(matches!(copied.headers[3].key, Cow::Owned(_)));
    }

    #[test]
    fn headers_read_in_place_give_the_first_of_a_name_and_every_one_in_order() {
        let record = record();
        let lent = record.lend();
        assert_eq!(
            lent.headers.first_named(HEADER_ATTEMPTS),
            Some(Some(&b"4"[..]))
        );
        assert_eq!(lent.headers.first_named("x-null"), Some(None));
        assert_eq!(lent.headers.first_named("bq-ATTEMPTS"), None);
        let mut seen = Vec::new();
        lent.headers
            .each(&mut |key, value| seen.push((key.to_owned(), value.map(<[u8]>::to_vec))));
        let expected: Vec<_> = record
            .headers
            .iter()
            .map(|h| (h.key.to_string(), h.value.clone()))
            .collect();
        assert_eq!(seen, expected);
        // The facts read in place are the owned record's.
        assert_eq!(
            projection::facts_of(lent.headers),
            projection::facts(&record)
        );
        let facts = projection::facts_of(lent.headers);
        assert_eq!(facts.count, Some(babelqueue_core::Count::Carried(4)));
        assert_eq!(facts.original_queue.as_deref(), Some("orders"));
        assert_eq!(
            facts.declared_version,
            babelqueue_core::Declared::Text("2".into())
        );
    }

    /// A client that only returns owned records: the default lending reads them in turn.
    #[derive(Debug)]
    struct Owned(std::sync::Mutex<Vec<Record>>);

    #[async_trait]
    impl KafkaConsumer for Owned {
        async fn poll(&self, _: Duration) -> Result<Option<Record>, KafkaError> {
            let mut records = self.0.lock().unwrap();
            Ok((!records.is_empty()).then(|| records.remove(0)))
        }
        async fn commit(&self, _: &TopicPartition, _: i64) -> Result<(), KafkaError> {
            Ok(())
        }
        async fn seek(&self, _: &TopicPartition, _: i64) -> Result<(), KafkaError> {
            Ok(())
        }
        fn pause(&self, _: &TopicPartition) -> Result<(), KafkaError> {
            Ok(())
        }
        fn resume(&self, _: &TopicPartition) -> Result<(), KafkaError> {
            Ok(())
        }
        async fn close(&self) {}
    }

    #[tokio::test]
    async fn the_default_lending_hands_out_poll_batch_s_records_in_order_up_to_max() {
        let records: Vec<Record> = (0..5).map(|offset| Record { offset, ..record() }).collect();
        let consumer = Owned(std::sync::Mutex::new(records.clone()));
        let mut lent = Vec::new();
        let n = consumer
            .poll_batch_lent(3, Duration::ZERO, &mut |r| lent.push(r.to_record()))
            .await
            .unwrap();
        assert_eq!((n, &lent[..]), (3, &records[..3]));
        let n = consumer
            .poll_batch_lent(8, Duration::ZERO, &mut |r| lent.push(r.to_record()))
            .await
            .unwrap();
        assert_eq!((n, &lent[..]), (2, &records[..]));
        let n = consumer
            .poll_batch_lent(8, Duration::ZERO, &mut |_| panic!("nothing is left"))
            .await
            .unwrap();
        assert_eq!(n, 0);
    }
}
