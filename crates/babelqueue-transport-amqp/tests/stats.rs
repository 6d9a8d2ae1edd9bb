//! `Stats` against a real RabbitMQ (`BQ_AMQP_URL`, default
//! `amqp://guest:guest@127.0.0.1:5672/%2f`): three published, one received and not
//! acknowledged. A passive declare counts ready messages only, so the held one is not in
//! `ready`, and `in_flight` is unknown. Without the broker the test prints `SKIPPED`; with
//! `BQ_REQUIRE_BROKERS` set it fails instead.

use std::time::Duration;

use babelqueue_core::Transport;
use babelqueue_core::redact::redact;
use babelqueue_testkit::{broker_or_skip, unique_queue};
use babelqueue_transport_amqp::AmqpTransport;

#[tokio::test]
async fn stats_count_ready_and_consumers() {
    let url = std::env::var("BQ_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let what = format!("RabbitMQ at {}", redact(&url));
    let Some(transport) = broker_or_skip(&what, AmqpTransport::connect(&url)).await else {
        return;
    };
    let queue = unique_queue("it-stats");
    let reader = transport.capabilities();
    let reader = reader.stats_reader().expect("amqp offers Stats");
    assert_eq!(
        reader.stats(&queue).await.expect("stats").total(),
        Some(0),
        "no queue yet"
    );
    for _ in 0..3 {
        transport.publish(&queue, b"{}").await.expect("publish");
    }
    transport
        .publish(&format!("{queue}.dlq"), b"{}")
        .await
        .expect("publish");
    let held = transport
        .pop(&queue, Duration::from_secs(2))
        .await
        .expect("pop")
        .expect("a delivery");
    // The consumer's prefetch may hold more than the one delivery handed out: ready is what
    // RabbitMQ has not sent to any consumer.
    let stats = reader.stats(&queue).await.expect("stats");
    assert!(stats.ready.is_some_and(|n| n <= 2), "{stats:?}");
    assert_eq!(stats.in_flight, None, "{stats:?}");
    assert_eq!(stats.consumers, Some(1), "{stats:?}");
    assert_eq!(stats.dead_letter, Some(1), "{stats:?}");
    transport.ack(&held).await.expect("ack");
    let _ = transport.close().await;
}
