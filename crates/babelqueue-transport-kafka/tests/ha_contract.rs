//! The transport contract suite on the three-node Kafka cluster of `scripts/brokers.sh up
//! kafka-cluster` (`BQ_KAFKA_CLUSTER_URL`: all three bootstrap servers in one URL; every topic
//! the suite uses is created by the brokers with replication factor 3 and
//! `min.insync.replicas=2`, and written with acks=all, the transport's default). Without the
//! cluster the test prints `SKIPPED`; with `BQ_REQUIRE_HA` set it fails instead.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout, missing_docs)]

#[path = "support/live_suite.rs"]
mod live_suite;
#[path = "support/reinjecting.rs"]
mod reinjecting;

use std::time::Duration;

use babelqueue_transport_kafka::KafkaOptions;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// How many brokers the metadata of the cluster lists.
async fn broker_count(brokers: String) -> Result<usize, String> {
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .create()
            .map_err(|e| e.to_string())?;
        consumer
            .fetch_metadata(None, Duration::from_secs(8))
            .map(|m| m.brokers().len())
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The cluster's URL when all three brokers answer, or `None` after a loud skip (a failure
/// with `BQ_REQUIRE_HA` set).
async fn cluster_url() -> Option<String> {
    let why = match std::env::var("BQ_KAFKA_CLUSTER_URL") {
        Err(_) => "BQ_KAFKA_CLUSTER_URL is not set".to_owned(),
        Ok(url) => {
            // A URL the transport refuses is a failure, never a skip.
            let config = KafkaOptions::from_url(&url)
                .unwrap_or_else(|e| panic!("the transport refuses the cluster URL {url}: {e}"));
            match tokio::time::timeout(Duration::from_secs(10), broker_count(config.brokers)).await
            {
                Ok(Ok(3)) => return Some(url),
                Ok(Ok(n)) => format!("{url}: {n} brokers of 3 listed"),
                Ok(Err(e)) => format!("{url}: {e}"),
                Err(_) => format!("{url}: no answer within 10 s"),
            }
        }
    };
    babelqueue_testkit::skip_or_fail_ha(format!(
        "the Kafka cluster is not up ({why}; scripts/brokers.sh up kafka-cluster, then eval \"$(scripts/brokers.sh env)\")"
    ));
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_on_the_cluster() {
    let Some(base) = cluster_url().await else {
        return;
    };
    let url = live_suite::url(&base, &live_suite::group());
    let config = KafkaOptions::from_url(&url).expect("a valid cluster URL");
    live_suite::run(url, config).await;
}
