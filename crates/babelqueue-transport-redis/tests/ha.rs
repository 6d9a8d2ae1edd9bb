//! The Redis transport across failovers, on the high-availability topologies of
//! `scripts/brokers.sh up redis-sentinel redis-cluster` (`BQ_REDIS_SENTINEL_URL`,
//! `BQ_REDIS_CLUSTER_URL` and `BQ_REDIS_CLUSTER_DIR` from `scripts/brokers.sh env`). A topology
//! that is not up prints `SKIPPED`; with `BQ_REQUIRE_HA` set it fails.
//!
//! The tests fail over the shared topology, one after the other (a lock), and leave it whole:
//! a demoted master rejoins as a replica, a killed cluster node is started again.

#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use babelqueue_transport_redis::topology::{self, Topology};
use tokio::sync::Mutex;

/// Publishes across a Sentinel failover, with and without `wait_replicas`; a worker that
/// consumes across one.
#[path = "ha/sentinel.rs"]
mod sentinel;

/// A master killed and a slot migrated under a running worker.
#[path = "ha/cluster.rs"]
mod cluster;

/// One failover at a time: the tests share the topology.
static FAILOVERS: Mutex<()> = Mutex::const_new(());

/// The URL in `var`, or `None` after a loud skip (a failure with `BQ_REQUIRE_HA` set).
fn topology_url(var: &str, what: &str) -> Option<String> {
    if let Ok(url) = std::env::var(var) {
        return Some(url);
    }
    babelqueue_testkit::skip_or_fail_ha(format!(
        "{what} is not up ({var} is not set; scripts/brokers.sh up redis-sentinel redis-cluster, then eval \"$(scripts/brokers.sh env)\")"
    ));
    None
}

/// The ports of the hosts a URL names (sentinels, cluster nodes).
fn ports(url: &str) -> Vec<u16> {
    match topology::parse(url).expect("a topology URL") {
        Topology::Sentinel(s) => s.sentinels.into_iter().map(|(_, p)| p).collect(),
        Topology::Cluster(c) => c.nodes.into_iter().map(|(_, p)| p).collect(),
        Topology::Single => panic!("not a topology URL"),
    }
}

/// `redis-cli -p port args…` on 127.0.0.1: its output, trimmed (empty when it failed).
async fn cli(port: u16, args: &[&str]) -> String {
    let out = tokio::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .await
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The same, blocking (for guards that restore a topology when a test panics).
fn cli_blocking(port: u16, args: &[&str]) {
    let _ = std::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output();
}

/// `INFO` fields of a server.
async fn info(port: u16, section: &str) -> BTreeMap<String, String> {
    cli(port, &["info", section])
        .await
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// Polls `check` every 100 ms until it holds, for at most `limit`.
async fn until<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a run published and what survived it.
#[derive(Debug, Default)]
struct Count {
    /// Publishes that returned Ok.
    acked: usize,
    /// Acknowledged and not found afterwards.
    lost: usize,
    /// Publish calls that returned an error (each retried until acknowledged).
    refused: usize,
    /// Extra copies found (a retried publish whose first write survived).
    duplicates: usize,
}
