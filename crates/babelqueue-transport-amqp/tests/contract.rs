//! The transport contract suite of `babelqueue-testkit`, run against a real RabbitMQ
//! (`BQ_AMQP_URL`, default `amqp://guest:guest@127.0.0.1:5672/%2f`). Without the broker the test
//! prints `SKIPPED`; with `BQ_REQUIRE_BROKERS` set it fails instead.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only.

#![allow(clippy::print_stdout)]

use std::collections::HashSet;
use std::time::Duration;

use babelqueue_core::Transport;
use babelqueue_testkit::{Features, MIB, Suite, broker_or_skip};
use babelqueue_transport_amqp::{AmqpTransport, AmqpUrl};
use lapin::options::QueueDeleteOptions;
use lapin::{Connection, ConnectionProperties};

fn url() -> String {
    std::env::var("BQ_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_passes_the_contract_suite() {
    let url = url();
    let what = format!("RabbitMQ at {}", babelqueue_core::redact::redact(&url));
    let Some(probe) = broker_or_skip(&what, AmqpTransport::connect(&url)).await else {
        return;
    };
    let _ = probe.close().await;
    let before = suite_queues();
    let features = Features::new()
        // one classic queue, one consumer with a prefetch that follows concurrency 1
        .ordered(true)
        // RabbitMQ requeues a delivery whose channel closed at once: dropping the transport
        // closes its connection. The tolerance covers a new connection and subscription.
        .redelivery_after(Duration::ZERO)
        // `max_message_size` (RabbitMQ 3.8 to 3.13: 128 MiB by default; 4.x: 16 MiB)
        .max_body_bytes(128 * MIB)
        .quiet_period(Duration::from_millis(500));
    // No delayed publish and so no delayed retry (RabbitMQ has no per-message delay without a
    // plugin; a retry is a confirmed copy, sent at once), no native dead-letter (the queues
    // are declared without arguments, as every SDK declares them), no delivery count (classic
    // queues carry only the `redelivered` flag).
    let make_url = url.clone();
    let report = Suite::new(features, move || {
        let url = make_url.clone();
        async move { AmqpTransport::connect(&url).await }
    })
    .run()
    .await;
    println!("{report}");
    // The suite's queues (`bq-<test>-…`, unique to this run) are durable: delete them.
    delete(&url, suite_queues().difference(&before)).await;
    report.assert_passed();
}

/// The testkit's queues on the broker (`bq-<test name>-…`), as `rabbitmqctl list_queues` shows
/// them; empty when it cannot run (the queues are then left behind).
fn suite_queues() -> HashSet<String> {
    let ctl = std::env::var("BQ_RABBITMQCTL").unwrap_or_else(|_| "rabbitmqctl".to_owned());
    let Ok(out) = std::process::Command::new(ctl)
        .args(["list_queues", "-q", "--no-table-headers", "name"])
        .output()
    else {
        return HashSet::new();
    };
    let prefixes: Vec<String> = babelqueue_testkit::tests()
        .iter()
        .map(|t| format!("bq-{}-", t.name.replace('_', "-")))
        .collect();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|name| prefixes.iter().any(|p| name.starts_with(p.as_str())))
        .map(str::to_owned)
        .collect()
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
