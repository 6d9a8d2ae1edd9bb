//! `Stats` against a real Kafka (`BQ_KAFKA_URL`, default `kafka://127.0.0.1:9092`): three
//! published, one received and not acknowledged (the group's lag is still three: Kafka knows
//! nothing handed out), then acknowledged and committed (two). Without the broker the test
//! prints `SKIPPED`; with `BQ_REQUIRE_BROKERS` set it fails instead.

use std::time::Duration;

use babelqueue_core::{Stats, Transport};
use babelqueue_testkit::{broker_or_skip, unique_queue};
use babelqueue_transport_kafka::{KafkaOptions, KafkaTransport, RdKafkaClient};

async fn reachable(config: KafkaOptions) -> Result<KafkaOptions, String> {
    for server in config.brokers.split(',') {
        if tokio::net::TcpStream::connect(server.trim()).await.is_ok() {
            return Ok(config);
        }
    }
    Err(format!(
        "no bootstrap server of {} answered",
        config.brokers
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_report_the_groups_lag() {
    let base = std::env::var("BQ_KAFKA_URL").unwrap_or_else(|_| "kafka://127.0.0.1:9092".into());
    let group = unique_queue("it-stats-group");
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}group_id={group}");
    let config = KafkaOptions::from_url(&url).expect("a valid BQ_KAFKA_URL");
    let Some(config) = broker_or_skip("Kafka (BQ_KAFKA_URL)", reachable(config)).await else {
        return;
    };
    let topic = unique_queue("it-stats");
    RdKafkaClient::new(config)
        .create_topics(&[&topic], 1)
        .await
        .expect("create the topic");
    let transport = KafkaTransport::connect(&url).await.expect("connect");
    assert_eq!(transport.stats(&topic).await.expect("stats").ready, Some(0));
    for _ in 0..3 {
        transport.publish(&topic, b"{}").await.expect("publish");
    }
    let mut held = None;
    for _ in 0..30 {
        held = transport
            .pop(&topic, Duration::from_secs(1))
            .await
            .expect("pop");
        if held.is_some() {
            break;
        }
    }
    let held = held.expect("a record within 30 s");
    let during = transport.stats(&topic).await.expect("stats");
    assert_eq!(during.ready, Some(3), "{during:?}");
    assert_eq!(during.in_flight, None, "{during:?}");
    assert_eq!(during.dead_letter, Some(0), "{during:?}");
    transport.ack(&held).await.expect("ack");
    transport.close().await.expect("close commits");
    let after = KafkaTransport::connect(&url).await.expect("connect");
    let after = after.stats(&topic).await.expect("stats");
    assert_eq!(after.ready, Some(2), "{after:?}");
}
