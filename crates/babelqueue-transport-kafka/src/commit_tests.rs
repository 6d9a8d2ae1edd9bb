//! Commits on an interval and batched produce, on the in-memory Kafka.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::{BatchAcker, BatchPublisher, Delivery, Transport};

use crate::KafkaTransport;
use crate::client::{Record, TimestampType, TopicPartition};
use crate::config::KafkaOptions;
use crate::fake::FakeKafka;

const GROUP: &str = "babelqueue";

fn record(n: usize) -> Record {
    Record {
        topic: String::new(),
        partition: 0,
        offset: 0,
        key: None,
        value: Some(format!("{{\"n\":{n}}}").into_bytes()),
        headers: Vec::new(),
        timestamp: None,
        timestamp_type: TimestampType::CreateTime,
    }
}

async fn receive_all(t: &KafkaTransport, n: usize) -> Vec<Delivery> {
    let mut got = Vec::new();
    while got.len() < n {
        let more = t
            .receive("orders", n - got.len(), Duration::from_secs(1))
            .await
            .unwrap();
        assert!(!more.is_empty(), "{} of {n} received", got.len());
        got.extend(more);
    }
    got
}

fn positions(kafka: &FakeKafka, partition: i32) -> Vec<i64> {
    kafka
        .commits()
        .into_iter()
        .filter(|(_, tp, _)| tp.partition == partition)
        .map(|(_, _, at)| at)
        .collect()
}

/// Batches acknowledged within one interval share one background commit; the commit stops
/// below a record still in flight, and a single acknowledgement commits before it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_share_a_background_commit_that_never_passes_an_unsettled_record() {
    let kafka = FakeKafka::new();
    let t = KafkaTransport::with_client(Arc::new(kafka.clone()), &KafkaOptions::default());
    t.set_commit_interval(Duration::from_millis(400));
    for n in 0..20 {
        kafka.append("orders", 0, record(n));
    }
    let got = receive_all(&t, 20).await;

    // The first batch: committed at once (no commit ran yet), from the background.
    t.ack_batch(&got[0..4]).await.unwrap();
    assert_eq!(
        crate::tests::committed_soon(&kafka, GROUP, "orders", 4).await,
        Some(4)
    );
    // Three more batches at once, record 10 still in flight: nothing goes out before the
    // interval has passed, then one commit, up to the record in flight and not beyond.
    t.ack_batch(&got[4..8]).await.unwrap();
    t.ack_batch(&got[8..10]).await.unwrap();
    t.ack_batch(&got[11..20]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(positions(&kafka, 0), [4], "waiting for the interval");
    assert_eq!(
        crate::tests::committed_soon(&kafka, GROUP, "orders", 10).await,
        Some(10)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        positions(&kafka, 0),
        [4, 10],
        "one commit for three batches"
    );
    assert_eq!(t.held("orders"), 10, "record 10 in flight, 11..19 settled");

    // Record 10 settles alone: a single acknowledgement commits before it returns.
    t.ack(&got[10]).await.unwrap();
    assert_eq!(positions(&kafka, 0), [4, 10, 20]);
    assert_eq!(t.held("orders"), 0);
}

/// What a rebalance takes away is committed before it goes (the next owner does not see
/// those records again), and closing the transport commits the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_commits_what_is_owed_and_close_commits_the_rest() {
    let kafka = FakeKafka::new();
    let t = KafkaTransport::with_client(Arc::new(kafka.clone()), &KafkaOptions::default());
    t.set_commit_interval(Duration::from_secs(30));
    kafka.create_topic("orders", 2);
    for n in 0..6_usize {
        kafka.append("orders", i32::from(n % 2 == 1), record(n));
    }
    let got = receive_all(&t, 6).await;
    // A first batch uses up the at-once flush; the rest is owed for 30 s.
    t.ack_batch(&got[0..1]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let first = kafka.commits().len();
    assert_eq!(first, 1);
    t.ack_batch(&got[1..6]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(kafka.commits().len(), first, "owed, not committed yet");

    let consumer = kafka.consumers().pop().unwrap();
    consumer.revoke(&[TopicPartition::new("orders", 1)]);
    assert_eq!(
        kafka.committed(GROUP, "orders", 1),
        Some(3),
        "committed on revoke"
    );
    assert!(
        kafka
            .events()
            .contains(&"commit on revoke orders[1]@3".to_owned()),
        "{:?}",
        kafka.events()
    );
    assert_eq!(kafka.committed(GROUP, "orders", 0), Some(1), "still owed");

    t.close().await.unwrap();
    assert_eq!(
        kafka.committed(GROUP, "orders", 0),
        Some(3),
        "committed at close"
    );
    assert_eq!(
        positions(&kafka, 1),
        [3],
        "the revoked partition is not committed twice"
    );
}

/// A batch publish goes through the producer's pipelined path once, in order, and a record
/// that fails surfaces as the batch's error while the others are still written.
#[tokio::test]
async fn a_batch_publish_is_one_pipelined_send_and_surfaces_a_failure() {
    let kafka = FakeKafka::new();
    let t = KafkaTransport::with_client(Arc::new(kafka.clone()), &KafkaOptions::default());
    let bodies: Vec<Vec<u8>> = (0..5).map(|n| format!("body {n}").into_bytes()).collect();
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    t.publish_batch("orders", &slices).await.unwrap();
    let values: Vec<Vec<u8>> = kafka
        .records("orders")
        .into_iter()
        .map(|r| r.value.unwrap())
        .collect();
    assert_eq!(values, bodies, "in order, byte for byte");
    assert_eq!(
        kafka
            .events()
            .iter()
            .filter(|e| e.starts_with("send many"))
            .collect::<Vec<_>>(),
        ["send many 5"]
    );
    assert!(t.capabilities().batch_publisher().is_some());

    kafka.fail_writes_to("orders", true);
    let err = t.publish_batch("orders", &slices[..2]).await.unwrap_err();
    assert!(err.to_string().contains("orders"), "{err}");
}
