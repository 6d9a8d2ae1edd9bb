//! Why a confirmed write with `acks=all` was not confirmed in time.
//!
//! A broker refuses a write with `acks=all` while fewer replicas of the partition are in sync
//! than its `min.insync.replicas` (`NOT_ENOUGH_REPLICAS`). librdkafka retries that refusal
//! until the delivery timeout and then reports only the timeout, so the reason would
//! be lost. On such a timeout this looks at the topic's metadata (at most once per topic every
//! [`FRESH`]: a batch that timed out asks once): a partition with fewer replicas in sync than it
//! has makes the error [`KafkaError::NotEnoughReplicas`], naming the setting and the shortfall.
//! Anything else keeps the timeout error. Only the failure path pays for it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::metadata::Metadata;
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;

use crate::error::KafkaError;
use crate::rd::RdContext;

/// How long one look at a topic's replicas explains the timeouts of that topic.
const FRESH: Duration = Duration::from_secs(5);

/// How long the metadata request may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(3);

/// The recent looks, per topic: when, and the shortfall seen (`None`: every replica in sync).
#[derive(Debug, Default)]
pub(crate) struct IsrCheck {
    recent: Mutex<HashMap<String, (Instant, Option<String>)>>,
    /// One look at a time: the writes that timed out together wait for it, then read it.
    looking: tokio::sync::Mutex<()>,
}

impl IsrCheck {
    /// `error`, or [`KafkaError::NotEnoughReplicas`] when it is a delivery timeout and a
    /// partition of its topic has fewer replicas in sync than it has.
    pub(crate) async fn explain(
        &self,
        producer: &FutureProducer<RdContext>,
        error: KafkaError,
    ) -> KafkaError {
        let (topic, waited) = match &error {
            KafkaError::DeliveryTimeout { topic, timeout } => (topic.clone(), Some(*timeout)),
            KafkaError::Delivery { topic, source }
                if source.rdkafka_error_code() == Some(RDKafkaErrorCode::MessageTimedOut) =>
            {
                (topic.clone(), None)
            }
            _ => return error,
        };
        let looking = self.looking.lock().await;
        let shortfall = match self.cached(&topic) {
            Some(seen) => seen,
            None => {
                let producer = producer.clone();
                let name = topic.clone();
                let seen = tokio::task::spawn_blocking(move || {
                    producer
                        .client()
                        .fetch_metadata(Some(&name), METADATA_TIMEOUT)
                        .ok()
                        .and_then(|m| shortfall(&m, &name))
                })
                .await
                .ok()
                .flatten();
                self.remember(&topic, seen.clone());
                seen
            }
        };
        drop(looking);
        match shortfall {
            Some(shortfall) => KafkaError::NotEnoughReplicas {
                topic,
                detail: match waited {
                    Some(timeout) => {
                        format!("{shortfall}, and nothing confirmed the write within {timeout:?}")
                    }
                    None => format!("{shortfall}, and the write timed out"),
                },
            },
            None => error,
        }
    }

    fn cached(&self, topic: &str) -> Option<Option<String>> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent
            .get(topic)
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, seen)| seen.clone())
    }

    fn remember(&self, topic: &str, seen: Option<String>) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|_, (at, _)| at.elapsed() < FRESH);
        recent.insert(topic.to_owned(), (Instant::now(), seen));
    }
}

/// The partitions of `topic` with fewer replicas in sync than they have, said in words.
fn shortfall(metadata: &Metadata, topic: &str) -> Option<String> {
    let short: Vec<String> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic)
        .flat_map(|t| t.partitions())
        .filter(|p| p.isr().len() < p.replicas().len())
        .map(|p| {
            format!(
                "partition {} has {} of its {} replicas in sync",
                p.id(),
                p.isr().len(),
                p.replicas().len()
            )
        })
        .collect();
    (!short.is_empty()).then(|| short.join("; "))
}
