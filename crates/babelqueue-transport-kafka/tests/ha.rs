//! Failover on the three-node Kafka cluster of `scripts/brokers.sh up kafka-cluster`
//! (replication factor 3, `min.insync.replicas=2`): a partition leader SIGKILLed under a worker
//! and a publisher, acks=all against acks=1 when a leader dies ahead of its followers, a write
//! refused for too few in-sync replicas, and two worker processes sharing the group while one
//! is SIGKILLed. Each prints an `HA-ROW` line with its figures.
//!
//! A test target of its own: the tests kill and pause the cluster's nodes, so they run one at a
//! time (a lock), and never beside the other targets' tests. Without the cluster they print
//! `SKIPPED`; with `BQ_REQUIRE_HA` set they fail instead.
//!
//! ```sh
//! scripts/brokers.sh up kafka-cluster && eval "$(scripts/brokers.sh env)"
//! BQ_REQUIRE_HA=1 cargo test -p babelqueue-transport-kafka --test ha -- --nocapture
//! ```

#![allow(
    missing_docs,
    unreachable_pub,
    dead_code,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::missing_panics_doc
)]

#[path = "ha/acks.rs"]
mod acks;
#[path = "ha/cluster.rs"]
mod cluster;
#[path = "ha/failover.rs"]
mod failover;
#[path = "ha/workers.rs"]
mod workers;
#[path = "ha/workload.rs"]
mod workload;

/// One test at a time: each kills or pauses nodes of the one cluster.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// Brings every node of the cluster back when dropped (at the end of a test, or when it
/// panics): paused nodes are continued, killed ones started again, and it waits until all
/// three are ready.
#[derive(Debug)]
pub struct Restore(pub cluster::Cluster);

impl Drop for Restore {
    fn drop(&mut self) {
        for node in cluster::NODES {
            if self.0.pid(node).is_some() {
                self.0.signal(node, "CONT");
            }
        }
        if let Err(e) = self.0.bring_back_blocking() {
            eprintln!("the Kafka cluster did not come back: {e}");
        }
    }
}
