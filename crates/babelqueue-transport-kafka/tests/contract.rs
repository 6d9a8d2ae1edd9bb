//! The transport contract suite of `babelqueue-testkit` against a real Kafka broker
//! (`BQ_KAFKA_URL`, default `kafka://127.0.0.1:9092`; `scripts/brokers.sh up kafka`), deployed
//! as the crate documents it (`support/live_suite.rs`). Without the broker the test prints
//! `SKIPPED`; with `BQ_REQUIRE_BROKERS` set it fails instead.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only (`contract_fake.rs` runs the suite on the in-memory fake, `ha_contract.rs` on
//! the three-node cluster, each in a process of its own).

#![allow(clippy::print_stdout, missing_docs)]

#[path = "support/live_suite.rs"]
mod live_suite;
#[path = "support/reinjecting.rs"]
mod reinjecting;

use babelqueue_testkit::broker_or_skip;
use babelqueue_transport_kafka::KafkaOptions;

fn base_url() -> String {
    std::env::var("BQ_KAFKA_URL").unwrap_or_else(|_| "kafka://127.0.0.1:9092".to_owned())
}

/// The bootstrap servers answer a TCP connection.
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
async fn contract() {
    let url = live_suite::url(&base_url(), &live_suite::group());
    let config = KafkaOptions::from_url(&url).expect("a valid BQ_KAFKA_URL");
    let Some(config) = broker_or_skip("Kafka (BQ_KAFKA_URL)", reachable(config)).await else {
        return;
    };
    live_suite::run(url, config).await;
}
