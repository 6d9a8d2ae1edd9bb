//! `kafka-cluster`: the three KRaft nodes of `scripts/brokers.sh up kafka-cluster` (replication
//! factor 3, `min.insync.replicas=2`, unclean leader election off). Its fault `leader-kill`
//! SIGKILLs the node that leads the row's topic (partition 0) while messages flow; the
//! controller fences it and moves its partitions to in-sync replicas; `clear` starts it again
//! (`scripts/brokers.sh up kafka-cluster` starts the nodes that are down, with their data) and
//! waits until every partition of the topic has a leader and three in-sync replicas.
//!
//! The publisher writes with the transport's default `acks=all`: with `min.insync.replicas=2`
//! a confirmed write is on two nodes at least.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;

use super::faults::{Action, Fault};
use super::nodes;
use super::{Deployment, Topology};
use crate::brokers::{self, Broker, Env};

#[derive(Debug)]
pub(crate) struct KafkaCluster;

#[async_trait]
impl Topology for KafkaCluster {
    fn name(&self) -> &'static str {
        "kafka-cluster"
    }

    fn broker(&self) -> Broker {
        Broker::Kafka
    }

    fn components(&self) -> &'static [&'static str] {
        &["kafka-cluster"]
    }

    /// The recovery bound: the controller fences a SIGKILLed node after
    /// `broker.session.timeout.ms` (9 s by default) and only then moves its partitions; the
    /// worker's group notices its coordinator's death too. At least three times the slowest
    /// recovery measured on the 2-core test machine (docs/ha.md). The node stays down longer
    /// than the fencing takes, so the recovery is the survivors', not the restart's.
    fn faults(&self, short: bool) -> Vec<Fault> {
        let hold = Duration::from_secs(if short { 10 } else { 15 });
        vec![Fault::topology(
            "leader-kill",
            format!(
                "SIGKILL of the node leading the topic's partition 0; started again after {}s; \
                 the publisher with the default acks=all",
                hold.as_secs()
            ),
            "kill-partition-leader",
            hold,
            Duration::from_secs(40),
        )]
    }

    fn in_short(&self) -> bool {
        false
    }

    async fn deploy(
        &self,
        env: &Env,
        _row: &str,
        queue: &str,
    ) -> Result<Box<dyn Deployment>, String> {
        let var = |key: &str| nodes::required(env, key, "kafka-cluster");
        let url = var("BQ_KAFKA_CLUSTER_URL")?;
        let dir = PathBuf::from(var("BQ_KAFKA_CLUSTER_DIR")?);
        env.brokers_sh(&["up", "kafka-cluster"], Duration::from_secs(300))
            .await?;
        Ok(Box::new(KafkaClusterRow {
            env: env.clone(),
            url,
            dir,
            topic: queue.to_owned(),
        }))
    }
}

#[derive(Debug)]
struct KafkaClusterRow {
    env: Env,
    url: String,
    /// The nodes' directories (`n<id>/kafka.pid`).
    dir: PathBuf,
    /// The row's topic (the queue).
    topic: String,
}

impl KafkaClusterRow {
    /// The pid of node `id`, when the process in its pid file runs from its directory's config
    /// (a recycled pid is never killed).
    fn pid(&self, id: i32) -> Result<u32, String> {
        let node = self.dir.join(format!("n{id}"));
        let pid = nodes::live_pid(&node.join("kafka.pid"))
            .ok_or_else(|| format!("node n{id} is not running"))?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&*node.to_string_lossy()) {
            Ok(pid)
        } else {
            Err(format!("pid {pid} is not node n{id}"))
        }
    }
}

#[async_trait]
impl Deployment for KafkaClusterRow {
    fn worker_base(&self) -> String {
        self.url.clone()
    }

    fn direct_base(&self) -> String {
        self.url.clone()
    }

    fn counting(&self) -> String {
        "not counted: the brokers' connection counts mix the worker with the publisher and the \
         nodes' own links, and a killed node's count is gone with it"
            .into()
    }

    async fn connects(&self) -> Result<Option<u64>, String> {
        Ok(None)
    }

    async fn inject(&self, fault: &Fault) -> Result<(), String> {
        if fault.action != Action::Topology("kill-partition-leader") {
            return Err(format!("{:?}: not a fault of kafka-cluster", fault.action));
        }
        let partitions = brokers::kafka_partitions(&self.url, &self.topic).await?;
        let (leader, isr) = partitions
            .first()
            .cloned()
            .ok_or_else(|| format!("topic {} has no partition", self.topic))?;
        if isr.len() < 3 {
            return Err(format!(
                "partition 0 of {} has {} in-sync replicas before the kill",
                self.topic,
                isr.len()
            ));
        }
        brokers::kill9(self.pid(leader)?).await
    }

    async fn clear(&self, _fault: &Fault) -> Result<(), String> {
        self.env
            .brokers_sh(&["up", "kafka-cluster"], Duration::from_secs(300))
            .await?;
        nodes::until(
            "every partition led, three replicas in sync",
            Duration::from_secs(120),
            || async {
                let partitions = brokers::kafka_partitions(&self.url, &self.topic).await?;
                if !partitions.is_empty()
                    && partitions.iter().all(|(l, isr)| *l >= 0 && isr.len() >= 3)
                {
                    Ok(())
                } else {
                    Err(format!("leaders and in-sync replicas: {partitions:?}"))
                }
            },
        )
        .await
    }

    async fn teardown(&self) {
        let _ = self
            .env
            .brokers_sh(&["up", "kafka-cluster"], Duration::from_secs(300))
            .await;
    }
}
