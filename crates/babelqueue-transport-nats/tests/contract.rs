//! The transport contract suite of `babelqueue-testkit`, run against a real nats-server with
//! JetStream (`BQ_NATS_URL`, default `nats://127.0.0.1:4222`). Without the server the test
//! prints `SKIPPED`; with `BQ_REQUIRE_BROKERS` set it fails instead.

#![allow(clippy::print_stdout)]

use std::collections::HashSet;
use std::time::Duration;

use babelqueue_testkit::{Features, Suite, broker_or_skip};
use babelqueue_transport_nats::NatsTransport;

/// The redelivery timeout of an unsettled delivery in this run (`ack_wait`).
const ACK_WAIT: Duration = Duration::from_secs(3);

fn url() -> String {
    let base = std::env::var("BQ_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let separator = if base.contains('?') { '&' } else { '?' };
    format!("{base}{separator}ack_wait={}", ACK_WAIT.as_secs())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract() {
    let Some(probe) = broker_or_skip("NATS JetStream", NatsTransport::connect(&url())).await else {
        return;
    };
    let features = Features::new()
        // -NAK with a delay; JetStream 2.9 has no delayed publish
        .delayed_retry(true)
        // one pull consumer, one message per pull: stream order
        .ordered(true)
        // num_delivered
        .native_redelivery_count(true)
        .redelivery_after(ACK_WAIT)
        .max_body_bytes(probe.max_payload());
    let before = test_streams(&probe).await;
    let url = url();
    let report = Suite::new(features, move || {
        let url = url.clone();
        async move { NatsTransport::connect(&url).await }
    })
    .run()
    .await;
    println!("{report}");
    // The suite's queues (`bq-…`, unique to this run) leave a stream each: delete them.
    for name in test_streams(&probe).await.difference(&before) {
        let _ = probe.jetstream().delete_stream(name).await;
    }
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
