//! The librdkafka client behind the seam (`rdkafka` 0.39, statically built librdkafka).

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::ClientContext;
use rdkafka::Message;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError as RdError;
use rdkafka::message::{BorrowedMessage, Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::client::{
    KafkaClient, KafkaConsumer, KafkaProducer, OutRecord, Record, RecordHeader, RevokeHook,
    TopicPartition,
};
use crate::config::KafkaConfig;
use crate::error::KafkaError;

const LOG: &str = "babelqueue::kafka::librdkafka";

/// How long a blocking seek waits for librdkafka.
const SEEK_TIMEOUT: Duration = Duration::from_secs(10);

/// The client context: librdkafka's log lines and errors go to `tracing`; a consumer's
/// revoked partitions go to the transport's hook.
#[derive(Clone)]
pub(crate) struct RdContext {
    on_revoke: Option<RevokeHook>,
}

impl ClientContext for RdContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => tracing::error!(target: LOG, facility = fac, "{message}"),
            RDKafkaLogLevel::Warning => tracing::warn!(target: LOG, facility = fac, "{message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: LOG, facility = fac, "{message}");
            }
            RDKafkaLogLevel::Debug => tracing::debug!(target: LOG, facility = fac, "{message}"),
        }
    }

    fn error(&self, error: RdError, reason: &str) {
        tracing::warn!(target: LOG, error = %error, "librdkafka: {reason}");
    }
}

impl ConsumerContext for RdContext {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let (Rebalance::Revoke(list), Some(hook)) = (rebalance, &self.on_revoke) {
            let revoked: Vec<TopicPartition> = list
                .elements()
                .iter()
                .map(|e| TopicPartition::new(e.topic(), e.partition()))
                .collect();
            tracing::info!(target: "babelqueue::kafka", partitions = ?revoked, "Partitions revoked by a rebalance; their in-flight records belong to the next owner");
            hook(&revoked);
        }
    }
}

/// The librdkafka-backed [`KafkaClient`]: one shared producer, one consumer per call.
///
/// Producer and consumers get `bootstrap.servers` from the config, then its librdkafka
/// options; the producer also `message.timeout.ms` = the delivery timeout, the consumers
/// `group.id`, `enable.auto.commit=false`, `auto.offset.reset=earliest` and
/// `allow.auto.create.topics=true` (each overridable through the options).
#[derive(Clone)]
pub struct RdKafkaClient {
    config: KafkaConfig,
    producer: Arc<OnceLock<Arc<RdProducer>>>,
    producer_init: Arc<Mutex<()>>,
}

impl fmt::Debug for RdKafkaClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RdKafkaClient")
            .field("brokers", &self.config.brokers)
            .finish_non_exhaustive()
    }
}

impl RdKafkaClient {
    /// A client for `config` (nothing connects until the first use).
    pub fn new(config: KafkaConfig) -> RdKafkaClient {
        RdKafkaClient {
            config,
            producer: Arc::new(OnceLock::new()),
            producer_init: Arc::new(Mutex::new(())),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &KafkaConfig {
        &self.config
    }

    fn base(&self, defaults: &[(&str, String)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.config.brokers);
        for (key, value) in defaults {
            config.set(*key, value);
        }
        for (key, value) in &self.config.client {
            config.set(key, value);
        }
        config
    }

    fn make_producer(&self) -> Result<Arc<RdProducer>, KafkaError> {
        let timeout_ms = self
            .config
            .delivery_timeout
            .as_millis()
            .clamp(1, i32::MAX as u128);
        let producer: FutureProducer<RdContext> = self
            .base(&[("message.timeout.ms", timeout_ms.to_string())])
            .create_with_context(RdContext { on_revoke: None })
            .map_err(KafkaError::client("create the producer"))?;
        Ok(Arc::new(RdProducer { producer }))
    }

    /// Creates `topics` with `partitions` partitions each (replication factor 1) and waits for
    /// the broker; a topic that already exists is fine. For tests and local setups; production
    /// topics are usually provisioned by other means.
    pub async fn create_topics(&self, topics: &[&str], partitions: i32) -> Result<(), KafkaError> {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        use rdkafka::types::RDKafkaErrorCode;
        let admin: AdminClient<RdContext> = self
            .base(&[])
            .create_with_context(RdContext { on_revoke: None })
            .map_err(KafkaError::client("create the admin client"))?;
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(1)))
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = admin
            .create_topics(&new, &options)
            .await
            .map_err(KafkaError::client("create topics"))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    tracing::error!(target: "babelqueue::kafka", topic, "Creating the topic failed");
                    return Err(KafkaError::Client {
                        operation: "create a topic",
                        source: RdError::AdminOp(code),
                    });
                }
            }
        }
        Ok(())
    }
}

impl KafkaClient for RdKafkaClient {
    fn producer(&self) -> Result<Arc<dyn KafkaProducer>, KafkaError> {
        if let Some(p) = self.producer.get() {
            return Ok(p.clone());
        }
        let _init = self.producer_init.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = self.producer.get() {
            return Ok(p.clone());
        }
        let made = self.make_producer()?;
        Ok(self.producer.get_or_init(|| made).clone())
    }

    fn consumer(
        &self,
        group_id: &str,
        topics: &[String],
        on_revoke: RevokeHook,
    ) -> Result<Arc<dyn KafkaConsumer>, KafkaError> {
        let consumer: StreamConsumer<RdContext> = self
            .base(&[
                ("group.id", group_id.to_owned()),
                ("enable.auto.commit", "false".to_owned()),
                ("auto.offset.reset", "earliest".to_owned()),
                ("allow.auto.create.topics", "true".to_owned()),
            ])
            .create_with_context(RdContext {
                on_revoke: Some(on_revoke),
            })
            .map_err(KafkaError::client("create the consumer"))?;
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&names)
            .map_err(KafkaError::client("subscribe"))?;
        Ok(Arc::new(RdConsumer {
            consumer: Mutex::new(Some(Arc::new(consumer))),
            topics: topics.to_vec(),
        }))
    }
}

/// The librdkafka producer.
pub(crate) struct RdProducer {
    producer: FutureProducer<RdContext>,
}

impl fmt::Debug for RdProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RdProducer").finish_non_exhaustive()
    }
}

#[async_trait]
impl KafkaProducer for RdProducer {
    async fn send(&self, record: OutRecord, timeout: Duration) -> Result<(), KafkaError> {
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for h in &record.headers {
            headers = headers.insert(Header {
                key: &h.key,
                value: h.value.as_deref(),
            });
        }
        let mut future = FutureRecord::<[u8], [u8]>::to(&record.topic)
            .payload(&record.value)
            .headers(headers);
        if let Some(key) = record.key.as_deref() {
            // An empty slice is an empty key, not a null one.
            future = future.key(key);
        }
        if let Some(ts) = record.timestamp {
            future = future.timestamp(ts);
        }
        match tokio::time::timeout(timeout, self.producer.send(future, timeout)).await {
            Err(_) => Err(KafkaError::DeliveryTimeout {
                topic: record.topic.clone(),
                timeout,
            }),
            Ok(Ok(_)) => Ok(()),
            Ok(Err((source, _))) => Err(KafkaError::Delivery {
                topic: record.topic.clone(),
                source,
            }),
        }
    }

    async fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        let producer = self.producer.clone();
        tokio::task::spawn_blocking(move || producer.flush(timeout))
            .await
            .map_err(|e| KafkaError::Config(format!("the flush task failed: {e}")))?
            .map_err(KafkaError::client("flush the producer"))
    }
}

/// A librdkafka group consumer.
pub(crate) struct RdConsumer {
    consumer: Mutex<Option<Arc<StreamConsumer<RdContext>>>>,
    topics: Vec<String>,
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
}

fn owned(message: &BorrowedMessage<'_>) -> Record {
    let headers = message
        .headers()
        .map(|h| {
            h.iter()
                .map(|header| RecordHeader {
                    key: header.key.to_owned(),
                    value: header.value.map(<[u8]>::to_vec),
                })
                .collect()
        })
        .unwrap_or_default();
    Record {
        topic: message.topic().to_owned(),
        partition: message.partition(),
        offset: message.offset(),
        key: message.key().map(<[u8]>::to_vec),
        value: message.payload().map(<[u8]>::to_vec),
        headers,
        timestamp: message.timestamp().to_millis().filter(|ms| *ms >= 0),
    }
}

#[async_trait]
impl KafkaConsumer for RdConsumer {
    async fn poll(&self, timeout: Duration) -> Result<Option<Record>, KafkaError> {
        let consumer = self.get()?;
        match tokio::time::timeout(timeout, consumer.recv()).await {
            Err(_) => Ok(None),
            Ok(Ok(message)) => Ok(Some(owned(&message))),
            Ok(Err(source)) => Err(KafkaError::Client {
                operation: "poll",
                source,
            }),
        }
    }

    async fn commit(&self, partition: &TopicPartition, next_offset: i64) -> Result<(), KafkaError> {
        let consumer = self.get()?;
        let list = RdConsumer::list(partition, Some(next_offset))?;
        tokio::task::spawn_blocking(move || consumer.commit(&list, CommitMode::Sync))
            .await
            .map_err(|e| KafkaError::Config(format!("the commit task failed: {e}")))?
            .map_err(KafkaError::client("commit"))
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
