//! `Stats` against a real Pulsar (`BQ_PULSAR_URL`, default `pulsar://127.0.0.1:6650`) and its
//! admin API (`BQ_PULSAR_ADMIN_URL`, default `http://127.0.0.1:8080`): three published, one
//! received and not acknowledged. Without the broker the test prints `SKIPPED`; with
//! `BQ_REQUIRE_BROKERS` set it fails instead.

use std::time::Duration;

use babelqueue_core::{Stats, Transport};
use babelqueue_testkit::{broker_or_skip, unique_queue};
use babelqueue_transport_pulsar::{PulsarOptions, PulsarTransport};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_ready_and_in_flight() {
    let url = std::env::var("BQ_PULSAR_URL").unwrap_or_else(|_| "pulsar://127.0.0.1:6650".into());
    let admin_url =
        std::env::var("BQ_PULSAR_ADMIN_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".to_owned());
    let connecting = async {
        PulsarTransport::builder(&url)?
            .options(PulsarOptions {
                admin_url: Some(admin_url),
                ..PulsarOptions::default()
            })
            .connect()
            .await
    };
    let Some(transport) = broker_or_skip("Pulsar (BQ_PULSAR_URL)", connecting).await else {
        return;
    };
    assert!(transport.capabilities().stats_reader().is_some());
    let queue = unique_queue("it-stats");
    assert_eq!(
        transport.stats(&queue).await.expect("stats").total(),
        Some(0)
    );
    for _ in 0..3 {
        transport.publish(&queue, b"{}").await.expect("publish");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut held = None;
    for _ in 0..20 {
        held = transport
            .pop(&queue, Duration::from_secs(1))
            .await
            .expect("pop");
        if held.is_some() {
            break;
        }
    }
    let held = held.expect("a message within 20 s");
    // The consumer's receive queue may hold more than the one handed out: every message the
    // broker dispatched counts as unacknowledged.
    let during = transport.stats(&queue).await.expect("stats");
    assert_eq!(during.total(), Some(3), "{during:?}");
    assert!(during.in_flight.is_some_and(|n| n >= 1), "{during:?}");
    assert_eq!(during.consumers, Some(1), "{during:?}");
    // the oldest message waited at least the pause, by the broker's clock against this host's
    let age = during.oldest_ready_age.expect("an age while messages wait");
    assert!(
        age >= Duration::from_millis(250) && age < Duration::from_secs(120),
        "{during:?}"
    );
    transport.ack(&held).await.expect("ack");
    let _ = transport.close().await;
}
