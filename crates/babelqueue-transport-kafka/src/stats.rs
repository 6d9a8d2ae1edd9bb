//! What Kafka says of a queue ([`Stats`]): the lag of the transport's consumer group on the
//! queue's topic, read by a [`KafkaReader`](crate::KafkaReader) that never joins the group.
//!
//! * `ready`: per partition, the high watermark less the group's committed offset (the low
//!   watermark when it has none, or when retention removed that record), summed. Kafka knows
//!   no "handed out" state: records a member fetched and has not committed are in it too;
//! * `dead_letter`: the same lag on `<queue>.dlq` (a group that never read the dead-letter
//!   topic lags by all of it);
//! * `in_flight`, `delayed`, `consumers`, `oldest_ready_age`: `None` (the group's members and
//!   their fetch positions need a group description; retry tiers are topics of their own).
//!
//! A topic that does not exist counts 0.

use async_trait::async_trait;
use babelqueue_core::{QueueStats, Stats, TransportError, TransportErrorKind};

use crate::client::{KafkaClient, PartitionBounds};
use crate::error::KafkaError;
use crate::transport::KafkaTransport;

/// What `bounds` says the group has not consumed yet.
fn lag(bounds: &[PartitionBounds]) -> u64 {
    bounds
        .iter()
        .map(|b| {
            let from = b.committed.unwrap_or(b.low).max(b.low);
            u64::try_from(b.high - from).unwrap_or(0)
        })
        .sum()
}

/// The lag of `group` on `topic` and on its dead-letter topic. Blocking.
fn read(client: &dyn KafkaClient, group: &str, topic: &str) -> Result<(u64, u64), KafkaError> {
    let reader = client.reader(group)?;
    let own = lag(&reader.bounds(topic)?);
    let dead_letter = lag(&reader.bounds(&format!("{topic}.dlq"))?);
    Ok((own, dead_letter))
}

#[async_trait]
impl Stats for KafkaTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        let client = self.client();
        let group = self.group_id().to_owned();
        let topic = queue.to_owned();
        let read = tokio::task::spawn_blocking(move || read(&*client, &group, &topic)).await;
        let (own, dead_letter) = match read {
            Ok(figures) => figures?,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => {
                return Err(TransportError::new(
                    TransportErrorKind::Other,
                    format!("the Kafka stats of {queue} were cancelled: {e}"),
                ));
            }
        };
        Ok(QueueStats::new(format!(
            "kafka: the lag of consumer group {:?} (end offsets less committed offsets)",
            self.group_id()
        ))
        .ready(own)
        .dead_letter(dead_letter))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use babelqueue_core::Transport;

    use super::*;
    use crate::client::TopicPartition;
    use crate::config::KafkaOptions;
    use crate::fake::FakeKafka;

    fn bounds(low: i64, high: i64, committed: Option<i64>) -> PartitionBounds {
        PartitionBounds {
            partition: TopicPartition {
                topic: "orders".into(),
                partition: 0,
            },
            low,
            high,
            committed,
        }
    }

    #[test]
    fn lag_starts_at_the_commit_else_the_low_watermark() {
        assert_eq!(lag(&[]), 0);
        assert_eq!(lag(&[bounds(0, 10, Some(4))]), 6);
        assert_eq!(lag(&[bounds(0, 10, None)]), 10);
        // retention removed the committed record: what is stored is what is left
        assert_eq!(lag(&[bounds(5, 10, Some(2))]), 5);
        assert_eq!(lag(&[bounds(0, 3, Some(3)), bounds(2, 9, None)]), 7);
    }

    #[tokio::test]
    async fn the_fake_reports_the_groups_lag() {
        let kafka = FakeKafka::new();
        let transport =
            KafkaTransport::with_client(Arc::new(kafka.clone()), &KafkaOptions::default());
        for _ in 0..3 {
            transport.publish("orders", b"{}").await.expect("publish");
        }
        let stats = transport.stats("orders").await.expect("stats");
        assert_eq!((stats.ready, stats.dead_letter), (Some(3), Some(0)));
        let held = transport
            .pop("orders", Duration::ZERO)
            .await
            .expect("pop")
            .expect("a record");
        transport.ack(&held).await.expect("ack");
        transport.close().await.expect("close");
        // close commits what was acknowledged
        assert_eq!(
            transport.stats("orders").await.expect("stats").ready,
            Some(2)
        );
    }
}
