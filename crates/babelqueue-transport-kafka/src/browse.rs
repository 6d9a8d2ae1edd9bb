//! Reading a queue without consuming it ([`Browser`], `babelqueue dlq list`).
//!
//! A browse captures, for each partition of the topic, where the transport's group stands (its
//! committed offset: the next record it will consume; the low watermark when it has none, or
//! when retention removed that record) and the high watermark, then reads that span through a
//! [`KafkaReader`](crate::KafkaReader): a consumer that is assigned the partitions instead of
//! subscribing, so it never joins the group or triggers a rebalance, with auto-commit and
//! offset storing off and no commit ever. The bodies come partition by partition, each in
//! offset order (Kafka keeps no order across partitions). With `max` = 0 the browse returns
//! every record up to the high watermarks captured at its start, so it ends even while
//! producers keep writing. A null value (a tombstone) reads as an empty body.

use async_trait::async_trait;
use babelqueue_core::{Browser, TransportError, TransportErrorKind};

use crate::client::KafkaClient;
use crate::error::KafkaError;
use crate::transport::KafkaTransport;

/// Up to `max` bodies (0: all) of `topic` not yet consumed by `group`, without consuming
/// them. Blocking.
fn browse(
    client: &dyn KafkaClient,
    group: &str,
    topic: &str,
    max: usize,
) -> Result<Vec<Vec<u8>>, KafkaError> {
    let reader = client.reader(group)?;
    let mut bodies = Vec::new();
    for bounds in reader.bounds(topic)? {
        let room = if max == 0 {
            usize::MAX
        } else {
            max.saturating_sub(bodies.len())
        };
        if room == 0 {
            break;
        }
        let from = bounds
            .committed
            .unwrap_or(bounds.low)
            .clamp(bounds.low, bounds.high.max(bounds.low));
        if from >= bounds.high {
            continue;
        }
        let span = usize::try_from(bounds.high - from).unwrap_or(usize::MAX);
        let records = reader.read(&bounds.partition, from, bounds.high, room.min(span))?;
        bodies.extend(records.into_iter().map(|r| r.value.unwrap_or_default()));
    }
    Ok(bodies)
}

#[async_trait]
impl Browser for KafkaTransport {
    /// The records of `queue`'s topic the transport's group has not consumed yet (from each
    /// partition's committed offset, else its low watermark) up to the high watermarks captured
    /// at the start, partition by partition, read by a [`KafkaReader`](crate::KafkaReader)
    /// that never joins the group or commits. A null value reads as an empty body; a topic
    /// that does not exist is empty.
    async fn browse(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, TransportError> {
        let client = self.client();
        let group = self.group_id().to_owned();
        let topic = queue.to_owned();
        let read = tokio::task::spawn_blocking(move || browse(&*client, &group, &topic, max)).await;
        match read {
            Ok(bodies) => Ok(bodies?),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(TransportError::new(
                TransportErrorKind::Other,
                format!("the Kafka browse of {queue} was cancelled: {e}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use babelqueue_core::{Browser, Transport};

    use crate::client::{Record, TimestampType};
    use crate::config::KafkaOptions;
    use crate::fake::FakeKafka;
    use crate::transport::KafkaTransport;

    const ENVELOPE: &[u8] = br#"{"job":"urn:babel:orders:created","trace_id":"t","data":{"n":1},"meta":{},"attempts":0}"#;

    fn transport(kafka: &FakeKafka) -> KafkaTransport {
        KafkaTransport::with_client(Arc::new(kafka.clone()), &KafkaOptions::default())
    }

    fn record(value: Option<&[u8]>) -> Record {
        Record {
            topic: String::new(),
            partition: 0,
            offset: 0,
            key: Some(b"k".to_vec()),
            value: value.map(<[u8]>::to_vec),
            headers: Vec::new(),
            timestamp: None,
            timestamp_type: TimestampType::CreateTime,
        }
    }

    /// Three bodies, one not an envelope and one not UTF-8, on `orders.dlq`.
    fn three(kafka: &FakeKafka) -> Vec<Vec<u8>> {
        let bodies = vec![
            ENVELOPE.to_vec(),
            b"not json".to_vec(),
            vec![0xff, 0x00, 0xfe],
        ];
        for body in &bodies {
            kafka.append("orders.dlq", 0, record(Some(body)));
        }
        bodies
    }

    #[tokio::test]
    async fn browsing_reads_every_body_in_place_and_changes_nothing() {
        let kafka = FakeKafka::new();
        let bodies = three(&kafka);
        let t = transport(&kafka);
        let browser = t.capabilities().browser().expect("Kafka offers a browser");
        assert_eq!(browser.browse("orders.dlq", 0).await.unwrap(), bodies);
        assert_eq!(browser.browse("orders.dlq", 0).await.unwrap(), bodies);
        assert!(
            kafka.events().is_empty(),
            "no write, commit or seek: {:?}",
            kafka.events()
        );
        assert!(
            kafka.consumers().is_empty(),
            "no group consumer was created"
        );
        assert_eq!(kafka.committed("babelqueue", "orders.dlq", 0), None);

        let mut taken = Vec::new();
        while let Some(d) = t.pop("orders.dlq", Duration::ZERO).await.unwrap() {
            taken.push(d.body().to_vec());
            t.ack(&d).await.unwrap();
        }
        assert_eq!(taken, bodies, "the consumer still gets all three");
    }

    #[tokio::test]
    async fn browsing_starts_at_the_groups_committed_offset() {
        let kafka = FakeKafka::new();
        let bodies = three(&kafka);
        let t = transport(&kafka);
        let first = t.pop("orders.dlq", Duration::ZERO).await.unwrap().unwrap();
        t.ack(&first).await.unwrap();
        assert_eq!(t.browse("orders.dlq", 0).await.unwrap(), bodies[1..]);

        // Another group's position is not ours.
        let other = KafkaTransport::with_client(
            Arc::new(kafka.clone()),
            &KafkaOptions {
                group_id: "tools".into(),
                ..KafkaOptions::default()
            },
        );
        assert_eq!(other.browse("orders.dlq", 0).await.unwrap(), bodies);
    }

    #[tokio::test]
    async fn max_bounds_the_browse_across_partitions_in_partition_order() {
        let kafka = FakeKafka::new();
        kafka.create_topic("orders.dlq", 2);
        kafka.append("orders.dlq", 1, record(Some(b"p1-a")));
        kafka.append("orders.dlq", 0, record(Some(b"p0-a")));
        kafka.append("orders.dlq", 0, record(Some(b"p0-b")));
        kafka.append("orders.dlq", 1, record(Some(b"p1-b")));
        let t = transport(&kafka);
        let all = t.browse("orders.dlq", 0).await.unwrap();
        assert_eq!(all, [&b"p0-a"[..], b"p0-b", b"p1-a", b"p1-b"]);
        assert_eq!(t.browse("orders.dlq", 3).await.unwrap(), all[..3]);
        assert_eq!(t.browse("orders.dlq", 1).await.unwrap(), all[..1]);
        assert_eq!(t.browse("orders.dlq", 9).await.unwrap(), all);
    }

    #[tokio::test]
    async fn a_missing_topic_is_empty_and_is_not_created() {
        let kafka = FakeKafka::new();
        let t = transport(&kafka);
        assert!(t.browse("nothing.dlq", 0).await.unwrap().is_empty());
        assert!(kafka.records("nothing.dlq").is_empty());
        assert!(kafka.topics_written().is_empty());
    }

    #[tokio::test]
    async fn a_tombstone_reads_as_an_empty_body() {
        let kafka = FakeKafka::new();
        kafka.append("orders.dlq", 0, record(None));
        kafka.append("orders.dlq", 0, record(Some(ENVELOPE)));
        let t = transport(&kafka);
        assert_eq!(
            t.browse("orders.dlq", 0).await.unwrap(),
            [Vec::new(), ENVELOPE.to_vec()]
        );
    }

    #[tokio::test]
    async fn a_refused_login_is_an_auth_error() {
        let kafka = FakeKafka::new();
        three(&kafka);
        kafka.refuse_credentials(true);
        let err = transport(&kafka).browse("orders.dlq", 0).await.unwrap_err();
        assert_eq!(err.kind(), babelqueue_core::TransportErrorKind::Auth);
    }
}
