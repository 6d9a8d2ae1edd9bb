//! `babelqueue publish` and `consume` through the URL of a three-server NATS cluster
//! (`scripts/brokers.sh up nats-cluster` exports it as `BQ_NATS_CLUSTER_URL`), with
//! `replicas=3`. A cluster that is not up prints `SKIPPED`; with `BQ_REQUIRE_HA` set it fails.

#![cfg(feature = "nats")]
#![allow(clippy::print_stdout)]

use crate::common;

use babelqueue::TransportErrorKind;
use babelqueue::nats::NatsTransport;
use common::{consume_n, publish_n};

const URN: &str = "urn:babel:cli:cluster";
const COUNT: usize = 20;

/// The cluster URL when the cluster answers, or `None` after a loud skip (a failure with
/// `BQ_REQUIRE_HA` set).
async fn cluster_url() -> Option<String> {
    let why = match std::env::var("BQ_NATS_CLUSTER_URL") {
        Err(_) => "BQ_NATS_CLUSTER_URL is not set".to_owned(),
        Ok(url) => match tokio::time::timeout(
            std::time::Duration::from_secs(10),
            NatsTransport::connect(&url),
        )
        .await
        {
            Ok(Ok(_)) => return Some(url),
            // A URL the transport refuses is a failure, never a skip.
            Ok(Err(e)) if e.kind() == TransportErrorKind::Config => {
                panic!("the NATS transport refuses the cluster URL {url}: {e}")
            }
            Ok(Err(e)) => format!("{url}: {e}"),
            Err(_) => format!("{url}: no answer within 10 s"),
        },
    };
    babelqueue_testkit::skip_or_fail_ha(format!(
        "the NATS cluster is not up ({why}; scripts/brokers.sh up nats-cluster, then eval \"$(scripts/brokers.sh env)\")"
    ));
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_and_consume_through_the_cluster_url_on_three_replicas() {
    let Some(cluster) = cluster_url().await else {
        return;
    };
    let url = format!("{cluster}?replicas=3");
    let queue = babelqueue_testkit::unique_queue("cli-cluster");
    publish_n(&url, &queue, URN, r#"{"via":"cluster"}"#, COUNT);

    // Kept on the three servers.
    let transport = NatsTransport::connect(&url).await.expect("the cluster");
    let stream = transport.options().stream_name(&queue).unwrap();
    let mut info = transport.jetstream().get_stream(&stream).await.unwrap();
    let info = info.info().await.unwrap();
    assert_eq!(
        (info.config.num_replicas, info.state.messages),
        (3, COUNT as u64)
    );

    // Consumed through the same servers, written the way the `nats` tool writes a list.
    let spelled = format!("{}?replicas=3", cluster.replace(',', ",nats://"));
    let consumed = std::panic::catch_unwind(|| {
        consume_n(
            &spelled,
            &queue,
            URN,
            &serde_json::json!({"via": "cluster"}),
            COUNT,
            10,
        );
    });
    // The stream goes either way (the test cluster outlives the test).
    let _ = transport.jetstream().delete_stream(&stream).await;
    if let Err(panic) = consumed {
        std::panic::resume_unwind(panic);
    }
    println!("{COUNT} published and consumed through {cluster} (3 replicas)");
}
