//! The transport contract suite of `babelqueue-testkit` on the three-node RabbitMQ cluster
//! (`scripts/brokers.sh up rabbitmq-cluster`: `BQ_AMQP_CLUSTER_URL`, every host), with
//! `queue_type=quorum`: every queue of the suite, dead-letter queues included, is a quorum
//! queue. Without the cluster the test prints `SKIPPED`; with `BQ_REQUIRE_HA` set it fails
//! instead.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout)]

use std::collections::HashSet;
use std::time::Duration;

use babelqueue_core::Transport;
use babelqueue_testkit::{Features, MIB, Suite, ha_or_skip, skip_or_fail_ha};
use babelqueue_transport_amqp::{AmqpTransport, AmqpUrl};
use lapin::options::QueueDeleteOptions;
use lapin::{Connection, ConnectionProperties};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rabbitmq_cluster_with_quorum_queues_passes_the_contract_suite() {
    let Ok(cluster) = std::env::var("BQ_AMQP_CLUSTER_URL") else {
        skip_or_fail_ha(
            "the RabbitMQ cluster is not configured: BQ_AMQP_CLUSTER_URL is not set \
             (scripts/brokers.sh up rabbitmq-cluster, then eval \"$(scripts/brokers.sh env)\")",
        );
        return;
    };
    let url = format!("{cluster}?queue_type=quorum");
    let what = format!(
        "the RabbitMQ cluster at {}",
        babelqueue_core::redact::redact(&url)
    );
    let Some(probe) = ha_or_skip(&what, AmqpTransport::connect(&url)).await else {
        return;
    };
    let _ = probe.close().await;
    let before = suite_queues();
    let features = Features::new()
        // a quorum queue is FIFO for one consumer, whose prefetch follows concurrency 1
        .ordered(true)
        // a consumer's channel closing returns its deliveries to the queue at once
        .redelivery_after(Duration::ZERO)
        // `max_message_size` (RabbitMQ 3.8 to 3.13: 128 MiB by default)
        .max_body_bytes(128 * MIB)
        .quiet_period(Duration::from_millis(500));
    // As on a classic queue: no delayed publish or delayed retry, no native dead-letter (no
    // dead-letter exchange is declared), and no native delivery count: a quorum queue's
    // `x-delivery-count` also counts deliveries returned by a closed channel, which are no
    // failed attempts, so the runtime keeps counting attempts in the body.
    let make_url = url.clone();
    let report = Suite::new(features, move || {
        let url = make_url.clone();
        async move { AmqpTransport::connect(&url).await }
    })
    .run()
    .await;
    println!("{report}");
    // The suite's queues (`bq-<test>-…`, unique to this run), dead-letter queues included, are
    // all quorum queues; they are durable: delete them.
    let after = suite_queues();
    let made: Vec<&(String, String)> = after.difference(&before).collect();
    let classic: Vec<&String> = made
        .iter()
        .filter(|(_, kind)| kind != "quorum")
        .map(|(name, _)| name)
        .collect();
    delete(&url, made.iter().map(|(name, _)| name)).await;
    report.assert_passed();
    assert!(
        made.iter().any(|(name, _)| name.ends_with(".dlq")),
        "the suite made dead-letter queues: {made:?}"
    );
    assert!(classic.is_empty(), "not quorum queues: {classic:?}");
}

/// The testkit's queues on the cluster and their types, as its `rabbitmqctl`
/// (`BQ_AMQP_CLUSTER_CTL`) shows them; empty when it cannot run (the queues are then left
/// behind).
fn suite_queues() -> HashSet<(String, String)> {
    let Some(ctl) = std::env::var_os("BQ_AMQP_CLUSTER_CTL") else {
        return HashSet::new();
    };
    let prefixes: Vec<String> = babelqueue_testkit::tests()
        .iter()
        .map(|t| format!("bq-{}-", t.name.replace('_', "-")))
        .collect();
    for node in 1..=3 {
        let Ok(out) = std::process::Command::new(&ctl)
            .args(["-n", &format!("bq-ha-{node}@localhost")])
            .args(["list_queues", "-q", "--no-table-headers", "name", "type"])
            .output()
        else {
            continue;
        };
        if !out.status.success() {
            continue;
        }
        return String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.trim().split_once('\t'))
            .filter(|(name, _)| prefixes.iter().any(|p| name.starts_with(p.as_str())))
            .map(|(name, kind)| (name.to_owned(), kind.to_owned()))
            .collect();
    }
    HashSet::new()
}

async fn delete(url: &str, queues: impl Iterator<Item = &String>) {
    let Ok(parsed) = AmqpUrl::parse(url) else {
        return;
    };
    let Ok(connection) = Connection::connect_uri(parsed.uri, ConnectionProperties::default()).await
    else {
        return;
    };
    if let Ok(channel) = connection.create_channel().await {
        for queue in queues {
            let _ = channel
                .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
                .await;
        }
    }
    let _ = connection
        .close(200, lapin::types::ShortString::from("bye"))
        .await;
}
