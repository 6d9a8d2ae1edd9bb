//! `Stats` against a real nats-server with JetStream (`BQ_NATS_URL`, default
//! `nats://127.0.0.1:4222`): three published, one received and not acknowledged. Without the
//! server the test prints `SKIPPED`; with `BQ_REQUIRE_BROKERS` set it fails instead.

use std::time::Duration;

use babelqueue_core::Transport;
use babelqueue_testkit::{broker_or_skip, unique_queue};
use babelqueue_transport_nats::NatsTransport;

#[tokio::test]
async fn stats_count_ready_and_in_flight() {
    let url = std::env::var("BQ_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let Some(transport) = broker_or_skip("nats-server", NatsTransport::connect(&url)).await else {
        return;
    };
    let queue = unique_queue("it-stats");
    let stats = |queue: String| {
        let transport = transport.clone();
        async move {
            transport
                .capabilities()
                .stats_reader()
                .expect("nats offers Stats")
                .stats(&queue)
                .await
                .expect("stats")
        }
    };
    let empty = stats(queue.clone()).await;
    assert_eq!(empty.total(), Some(0), "no stream yet");
    assert_eq!(empty.oldest_ready_age, None, "{empty:?}");
    for _ in 0..3 {
        transport.publish(&queue, b"{}").await.expect("publish");
    }
    transport
        .publish(&format!("{queue}.dlq"), b"{}")
        .await
        .expect("publish");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = stats(queue.clone()).await;
    assert_eq!(
        (before.ready, before.in_flight),
        (Some(3), Some(0)),
        "{before:?}"
    );
    let held = transport
        .pop(&queue, Duration::from_secs(2))
        .await
        .expect("pop")
        .expect("a delivery");
    let during = stats(queue.clone()).await;
    assert_eq!(during.ready, Some(2), "{during:?}");
    assert_eq!(during.in_flight, Some(1), "{during:?}");
    assert_eq!(during.dead_letter, Some(1), "{during:?}");
    // the oldest message waited at least the pause, by the broker's clock against this host's
    let age = during.oldest_ready_age.expect("an age while messages wait");
    assert!(
        age >= Duration::from_millis(250) && age < Duration::from_secs(120),
        "{during:?}"
    );
    transport.ack(&held).await.expect("ack");
    for name in [queue.clone(), format!("{queue}.dlq")] {
        if let Ok(stream) = transport.options().stream_name(&name) {
            let _ = transport.jetstream().delete_stream(&stream).await;
        }
    }
}
