//! `redis-cluster`: the Redis Cluster of `scripts/brokers.sh up redis-cluster` (three masters,
//! one replica each, `cluster-node-timeout` 2 s). Its fault `failover` SIGKILLs the master that
//! owns the slot of the row's queue while messages flow; its replica takes the slot over;
//! `clear` waits until a live master owns the slot, starts the killed node again with its own
//! config (it rejoins from its nodes.conf, as a replica of the node that took its slots) and
//! waits until the cluster is whole.
//!
//! The worker and the publisher find the nodes from the cluster URL. The publisher writes with
//! `wait_replicas=1`, as on Sentinel: replication is asynchronous, and a write only the dead
//! master had would go with it.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue::redis::topology::{self, Topology as RedisTopology};

use super::faults::{Action, Fault};
use super::nodes;
use super::redis_kills::RedisKills;
use super::{Deployment, Topology};
use crate::brokers::{self, Broker, Env};

/// The publisher's write concern (see the module's doc).
const PUBLISHER_OPTIONS: &str = "wait_replicas=1&wait_timeout_ms=500";

#[derive(Debug)]
pub(crate) struct RedisCluster;

#[async_trait]
impl Topology for RedisCluster {
    fn name(&self) -> &'static str {
        "redis-cluster"
    }

    fn broker(&self) -> Broker {
        Broker::Redis
    }

    fn components(&self) -> &'static [&'static str] {
        &["redis-cluster"]
    }

    /// The recovery bound is at least three times the slowest recovery measured on the 2-core
    /// test machine (docs/ha.md): the nodes declare the master failed after `cluster-node-timeout`
    /// (2 s), its replica waits a moment before it asks for the votes, and the worker's
    /// reconnect back-off (capped at 5 s) finds it.
    fn faults(&self, short: bool) -> Vec<Fault> {
        let hold = Duration::from_secs(if short { 5 } else { 10 });
        vec![Fault::topology(
            "failover",
            format!(
                "SIGKILL of the master owning the queue's slot; started again after {}s, once \
                 a live master owned the slot; the publisher writes with {PUBLISHER_OPTIONS}",
                hold.as_secs()
            ),
            "kill-slot-master",
            hold,
            Duration::from_secs(25),
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
        let url = nodes::required(env, "BQ_REDIS_CLUSTER_URL", "redis-cluster")?;
        let RedisTopology::Cluster(parsed) = topology::parse(&url).map_err(|e| e.to_string())?
        else {
            return Err(format!("{url}: not a redis+cluster:// URL"));
        };
        let key = brokers::redis_ready_key(&url, queue)?;
        let row = ClusterRow {
            env: env.clone(),
            url,
            queue: queue.to_owned(),
            nodes: parsed.nodes.into_iter().map(|(_, p)| p).collect(),
            key,
            dir: env.brokers_dir().join("redis-cluster"),
            kills: RedisKills::new(env.clone()),
        };
        row.whole().await?;
        Ok(Box::new(row))
    }
}

#[derive(Debug)]
struct ClusterRow {
    env: Env,
    url: String,
    queue: String,
    /// Every node's port, as the URL names them.
    nodes: Vec<u16>,
    /// The queue's ready list: its slot is the one whose master is killed.
    key: String,
    /// The nodes' directories (`<port>/redis.conf`).
    dir: PathBuf,
    /// `redis-cli`, and the master this row killed.
    kills: RedisKills,
}

impl ClusterRow {
    /// The live master that owns the queue's slot, as the first node that answers sees it.
    async fn slot_master(&self, not: Option<u16>) -> Result<u16, String> {
        let mut last = String::from("no node answered");
        for port in self.nodes.iter().filter(|p| Some(**p) != not) {
            let slot = match self
                .kills
                .cli(*port, &["CLUSTER", "KEYSLOT", &self.key])
                .await
            {
                Ok(s) => s.trim().parse::<u16>().map_err(|e| format!("{s:?}: {e}"))?,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let nodes = self.kills.cli(*port, &["CLUSTER", "NODES"]).await?;
            return master_of_slot(&nodes, slot)
                .ok_or_else(|| format!("no live master owns slot {slot}"));
        }
        Err(last)
    }

    /// Waits until every node runs, the cluster is ok everywhere and has three masters.
    async fn whole(&self) -> Result<(), String> {
        nodes::until(
            "a whole cluster (six nodes, cluster_state:ok)",
            Duration::from_secs(60),
            || async {
                for port in &self.nodes {
                    let info = self.kills.cli(*port, &["CLUSTER", "INFO"]).await?;
                    if !info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:6")
                    {
                        return Err(format!(":{port} is not ok"));
                    }
                    let replication = self.kills.cli(*port, &["INFO", "replication"]).await?;
                    if replication.contains("role:slave")
                        && !replication.contains("master_link_status:up")
                    {
                        return Err(format!(":{port} is a replica not in sync"));
                    }
                }
                Ok(())
            },
        )
        .await
    }

    async fn restart(&self, port: u16) -> Result<(), String> {
        nodes::until(
            "a live master owning the queue's slot",
            Duration::from_secs(60),
            || async move {
                let master = self.slot_master(Some(port)).await?;
                if master == port {
                    Err(format!("the slot is still :{port}'s"))
                } else {
                    Ok(master)
                }
            },
        )
        .await?;
        let conf = self.dir.join(port.to_string()).join("redis.conf");
        nodes::spawn_detached("redis-server", &[&conf.display().to_string()]).await?;
        self.kills.restarted()?;
        self.whole().await
    }
}

/// The port of the live master that serves `slot`, from a `CLUSTER NODES` reply (`id
/// host:port@bus flags master ping pong epoch state slot-ranges…`).
fn master_of_slot(nodes: &str, slot: u16) -> Option<u16> {
    nodes.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let flags = fields.get(2)?;
        if !flags.split(',').any(|f| f == "master") || flags.contains("fail") {
            return None;
        }
        let serves = fields.iter().skip(8).any(|range| {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
        });
        if !serves {
            return None;
        }
        let addr = fields.get(1)?.split('@').next()?;
        addr.rsplit_once(':')?.1.parse().ok()
    })
}

#[async_trait]
impl Deployment for ClusterRow {
    fn worker_base(&self) -> String {
        self.url.clone()
    }

    fn direct_base(&self) -> String {
        format!("{}?{PUBLISHER_OPTIONS}", self.url)
    }

    fn counting(&self) -> String {
        "not counted: the nodes' connection counts mix the worker with the publisher and the \
         cluster bus"
            .into()
    }

    async fn connects(&self) -> Result<Option<u64>, String> {
        Ok(None)
    }

    async fn inject(&self, fault: &Fault) -> Result<(), String> {
        if fault.action != Action::Topology("kill-slot-master") {
            return Err(format!("{:?}: not a fault of redis-cluster", fault.action));
        }
        let master = self.slot_master(None).await?;
        self.kills.kill(master).await
    }

    async fn clear(&self, _fault: &Fault) -> Result<(), String> {
        match self.kills.killed()? {
            Some(port) => self.restart(port).await,
            None => Ok(()),
        }
    }

    async fn teardown(&self) {
        if let Ok(Some(port)) = self.kills.killed() {
            let _ = self.restart(port).await;
        }
        brokers::redis_cleanup(&self.env, Broker::Redis, &self.url, &self.queue).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slot_master_is_read_from_cluster_nodes() {
        let nodes = "\
a1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-98 100-5460
b2 127.0.0.1:30002@40002 master,fail - 0 0 2 connected 5461-10922
c3 127.0.0.1:30003@40003 master - 0 0 3 connected 10923-16383
d4 127.0.0.1:30004@40004 slave a1 0 0 1 connected
e5 127.0.0.1:30005@40005 master - 0 0 7 connected 5461-10922 99
";
        assert_eq!(master_of_slot(nodes, 0), Some(30001));
        assert_eq!(master_of_slot(nodes, 5460), Some(30001));
        // The failed master is passed over for the one that took its slots.
        assert_eq!(master_of_slot(nodes, 6000), Some(30005));
        assert_eq!(master_of_slot(nodes, 99), Some(30005), "a single slot");
        assert_eq!(master_of_slot(nodes, 16383), Some(30003));
        assert_eq!(master_of_slot("", 1), None);
    }
}
