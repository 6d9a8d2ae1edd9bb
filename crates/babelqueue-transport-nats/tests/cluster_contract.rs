//! The transport contract suite of `babelqueue-testkit` on the three-server cluster of
//! `scripts/brokers.sh up nats-cluster`, through its URL (all three servers) with `replicas=3`:
//! every queue of the suite is a stream kept on the three servers. A cluster that is not up
//! prints `SKIPPED`; with `BQ_REQUIRE_HA` set it fails.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout)]

mod common;

use std::collections::HashSet;
use std::time::Duration;

use babelqueue_testkit::{Features, Suite};
use babelqueue_transport_nats::NatsTransport;
use common::Cluster;

/// The redelivery timeout of an unsettled delivery in this run (`ack_wait`).
const ACK_WAIT: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_on_a_three_server_cluster_with_three_replicas() {
    let Some(cluster) = Cluster::from_env().await else {
        return;
    };
    let url = cluster.url_with(&format!("replicas=3&ack_wait={}", ACK_WAIT.as_secs()));
    let probe = NatsTransport::connect(&url)
        .await
        .expect("the cluster answers");
    assert_eq!(probe.options().servers().len(), 3, "{url}");
    let features = Features::new()
        .delayed_retry(true)
        .ordered(true)
        .native_redelivery_count(true)
        .redelivery_after(ACK_WAIT)
        .max_body_bytes(probe.max_payload());
    let before = test_streams(&probe).await;
    let make = url.clone();
    let report = Suite::new(features, move || {
        let url = make.clone();
        async move { NatsTransport::connect(&url).await }
    })
    .run()
    .await;
    println!("{report}");
    let created: Vec<String> = test_streams(&probe)
        .await
        .difference(&before)
        .cloned()
        .collect();
    // Every stream the suite made is kept on the three servers.
    let mut replicated = 0;
    for name in &created {
        if let Ok(mut stream) = probe.jetstream().get_stream(name).await
            && let Ok(info) = stream.info().await
        {
            assert_eq!(info.config.num_replicas, 3, "{name}");
            replicated += 1;
        }
        let _ = probe.jetstream().delete_stream(name).await;
    }
    println!("{replicated} streams of the suite, each with 3 replicas");
    assert!(replicated > 0, "the suite made no stream");
    report.assert_passed();
}

/// The streams of the testkit's queues (`unique_queue` names start with `bq-`).
async fn test_streams(t: &NatsTransport) -> HashSet<String> {
    use futures_util::TryStreamExt;
    let prefix = format!("{}bq-", t.options().stream_prefix);
    t.jetstream()
        .stream_names()
        .try_filter(|name| std::future::ready(name.starts_with(&prefix)))
        .try_collect()
        .await
        .unwrap_or_default()
}
