//! `babelqueue publish` and `consume` through the URL of a three-node Kafka cluster
//! (`scripts/brokers.sh up kafka-cluster` exports it as `BQ_KAFKA_CLUSTER_URL`, all three
//! bootstrap servers in one URL), with acks=all (the transport's default) on a topic the
//! brokers create on three replicas. A cluster that is not up prints `SKIPPED`; with
//! `BQ_REQUIRE_HA` set it fails.

#![cfg(feature = "kafka")]
#![allow(clippy::print_stdout)]

use crate::common;

use std::net::TcpStream;
use std::time::Duration;

use babelqueue::kafka::{Acks, KafkaOptions};
use common::{consume_n, publish_n};

const URN: &str = "urn:babel:cli:cluster";
const COUNT: usize = 20;

/// The cluster URL when each of its bootstrap servers answers, or `None` after a loud skip (a
/// failure with `BQ_REQUIRE_HA` set).
fn cluster_url() -> Option<String> {
    let why = match std::env::var("BQ_KAFKA_CLUSTER_URL") {
        Err(_) => "BQ_KAFKA_CLUSTER_URL is not set".to_owned(),
        Ok(url) => {
            // A URL the transport refuses is a failure, never a skip.
            let options = KafkaOptions::from_url(&url).unwrap_or_else(|e| {
                panic!("the Kafka transport refuses the cluster URL {url}: {e}")
            });
            assert_eq!(options.acks, Acks::All, "acks=all by default");
            let down: Vec<&str> = options
                .brokers
                .split(',')
                .filter(|server| {
                    server.parse().map_or(true, |addr| {
                        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err()
                    })
                })
                .collect();
            if down.is_empty() {
                return Some(url);
            }
            format!("{url}: {down:?} do not answer")
        }
    };
    babelqueue_testkit::skip_or_fail_ha(format!(
        "the Kafka cluster is not up ({why}; scripts/brokers.sh up kafka-cluster, then eval \"$(scripts/brokers.sh env)\")"
    ));
    None
}

#[test]
fn publish_and_consume_through_the_cluster_url() {
    let Some(cluster) = cluster_url() else {
        return;
    };
    let queue = babelqueue_testkit::unique_queue("cli-kafka-cluster");
    let group = babelqueue_testkit::unique_queue("cli-group");
    publish_n(&cluster, &queue, URN, r#"{"via":"cluster"}"#, COUNT);
    let url = format!("{cluster}?group_id={group}");
    consume_n(
        &url,
        &queue,
        URN,
        &serde_json::json!({"via": "cluster"}),
        COUNT,
        20,
    );
    println!("{COUNT} published and consumed through {cluster}");
}
