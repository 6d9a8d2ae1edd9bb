//! The transport contract suite of `babelqueue-testkit` on the high-availability topologies of
//! `scripts/brokers.sh up redis-sentinel redis-cluster`: through Redis Sentinel
//! (`BQ_REDIS_SENTINEL_URL`) and on Redis Cluster (`BQ_REDIS_CLUSTER_URL`), each in both
//! layouts. A topology that is not up prints `SKIPPED`; with `BQ_REQUIRE_HA` set it fails.
//!
//! On the cluster the reliable layout runs with the suite's own queue names (each queue's keys
//! are tagged `{queue}`, and its dead-letter queue `queue.dlq` hashes to another slot, so
//! dead-lettering takes the steps of a cross-slot settle). The Laravel layout needs a hash tag
//! in every key: it runs with the prefix `{bq-contract}:queues:`, which puts every queue of the
//! run in one slot.
//!
//! The suite's graceful-shutdown test sends SIGTERM to this process, so this file holds this
//! one test only, and runs the four suites one after the other.

#![allow(clippy::print_stdout)]

use std::time::Duration;

use babelqueue_testkit::{Features, Report, Suite};
use babelqueue_transport_redis::RedisTransport;

/// See tests/contract.rs: 2 s leaves a handler at least one second of a whole-second deadline.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// The URL in `var`, or `None` after a loud skip (a failure with `BQ_REQUIRE_HA` set).
fn topology(var: &str, what: &str) -> Option<String> {
    if let Ok(url) = std::env::var(var) {
        return Some(url);
    }
    babelqueue_testkit::skip_or_fail_ha(format!(
        "{what} is not up ({var} is not set; scripts/brokers.sh up redis-sentinel redis-cluster, then eval \"$(scripts/brokers.sh env)\")"
    ));
    None
}

fn common() -> Features {
    Features::new()
        .ordered(true)
        .redelivery_after(RETRY_AFTER)
        .quiet_period(Duration::from_millis(500))
}

fn reliable() -> Features {
    common()
}

fn laravel() -> Features {
    common()
        .delayed_retry(true)
        .delay_granularity(Duration::from_secs(1))
        .delay_probe(Duration::from_secs(2))
}

async fn run(url: &str, laravel: bool, prefix: Option<&str>, features: Features) -> Report {
    let url = url.to_owned();
    let prefix = prefix.map(str::to_owned);
    Suite::new(features, move || {
        let mut builder = RedisTransport::builder(url.clone())
            .laravel(laravel)
            .retry_after(Some(RETRY_AFTER));
        if let Some(prefix) = &prefix {
            builder = builder.prefix(prefix.clone());
        }
        builder.connect()
    })
    .run()
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_and_cluster_pass_the_contract_suite_in_both_layouts() {
    let mut reports = Vec::new();
    if let Some(url) = topology("BQ_REDIS_SENTINEL_URL", "Redis Sentinel") {
        let url = format!("{url}?wait_replicas=1");
        reports.push((
            "sentinel, reliable layout",
            run(&url, false, None, reliable()).await,
        ));
        reports.push((
            "sentinel, Laravel layout",
            run(&url, true, None, laravel()).await,
        ));
    }
    if let Some(url) = topology("BQ_REDIS_CLUSTER_URL", "Redis Cluster") {
        reports.push((
            "cluster, reliable layout",
            run(&url, false, None, reliable()).await,
        ));
        reports.push((
            "cluster, Laravel layout",
            run(&url, true, Some("{bq-contract}:queues:"), laravel()).await,
        ));
    }
    for (what, report) in &reports {
        println!("{what}:\n{report}");
    }
    for (_, report) in &reports {
        report.assert_passed();
    }
}
