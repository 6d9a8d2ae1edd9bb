//! `rabbitmq-cluster`: the three nodes of `scripts/brokers.sh up rabbitmq-cluster`
//! (bq-ha-{1,2,3}@localhost), the row's queue a quorum queue (`queue_type=quorum`: replicated
//! on the three, a publish confirmed once a majority has it). Its fault `node-kill` SIGKILLs the
//! Erlang VM of the node that leads the queue while messages flow; the other two elect a new
//! leader; `clear` starts the node again (`scripts/brokers.sh up rabbitmq-cluster` starts the
//! nodes that are down) and waits until the queue has a leader on a running node.
//!
//! The worker and the publisher connect through the cluster URL (every node's host): a client
//! of the killed node moves to another.

use std::time::Duration;

use async_trait::async_trait;

use super::faults::{Action, Fault};
use super::nodes;
use super::{Deployment, Topology};
use crate::brokers::{self, Broker, Env};

/// The nodes, as `rabbitmqctl -n` names them.
const NODES: [&str; 3] = [
    "bq-ha-1@localhost",
    "bq-ha-2@localhost",
    "bq-ha-3@localhost",
];

#[derive(Debug)]
pub(crate) struct RabbitCluster;

#[async_trait]
impl Topology for RabbitCluster {
    fn name(&self) -> &'static str {
        "rabbitmq-cluster"
    }

    fn broker(&self) -> Broker {
        Broker::Rabbitmq
    }

    fn components(&self) -> &'static [&'static str] {
        &["rabbitmq-cluster"]
    }

    /// The recovery bound is at least three times the slowest recovery measured on the 2-core
    /// test machine (docs/ha.md): the quorum queue's followers elect a new leader as soon as the
    /// dead node's distribution link drops, and a client of the dead node reconnects to another.
    fn faults(&self, short: bool) -> Vec<Fault> {
        let hold = Duration::from_secs(if short { 5 } else { 10 });
        vec![Fault::topology(
            "node-kill",
            format!(
                "SIGKILL of the node leading the row's quorum queue; started again after {}s",
                hold.as_secs()
            ),
            "kill-leader-node",
            hold,
            Duration::from_secs(10),
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
        let var = |key: &str| nodes::required(env, key, "rabbitmq-cluster");
        let url = var("BQ_AMQP_CLUSTER_URL")?;
        let ctl = var("BQ_AMQP_CLUSTER_CTL")?;
        env.brokers_sh(&["up", "rabbitmq-cluster"], Duration::from_secs(300))
            .await?;
        let sep = if url.contains('?') { '&' } else { '?' };
        Ok(Box::new(RabbitClusterRow {
            env: env.clone(),
            url: format!("{url}{sep}queue_type=quorum"),
            ctl,
            queue: queue.to_owned(),
        }))
    }
}

#[derive(Debug)]
struct RabbitClusterRow {
    env: Env,
    /// The cluster URL with `queue_type=quorum`.
    url: String,
    /// rabbitmqctl with the cluster's cookie.
    ctl: String,
    queue: String,
}

impl RabbitClusterRow {
    /// `rabbitmqctl -n NODE -q ARGS…` on the first node that answers.
    async fn ctl(&self, args: &[&str]) -> Result<String, String> {
        let mut last = String::new();
        for node in NODES {
            let mut cmd = self.env.command(&self.ctl);
            cmd.args(["-n", node, "-q"]).args(args);
            match brokers::run(cmd, Duration::from_secs(30)).await {
                Ok(out) => return Ok(out),
                Err(e) => last = e,
            }
        }
        Err(format!("rabbitmqctl {args:?} failed on every node: {last}"))
    }

    /// The node that leads the queue (`list_queues name leader`).
    async fn leader(&self) -> Result<String, String> {
        let out = self
            .ctl(&["list_queues", "--no-table-headers", "name", "leader"])
            .await?;
        leader_of(&out, &self.queue)
            .ok_or_else(|| format!("queue {} has no leader in {out:?}", self.queue))
    }
}

/// The leader column of `queue`'s line in `rabbitmqctl list_queues name leader` (tab-separated).
fn leader_of(list: &str, queue: &str) -> Option<String> {
    list.lines().find_map(|line| {
        let mut cols = line.split('\t');
        (cols.next()? == queue)
            .then(|| cols.next().map(str::trim).unwrap_or_default().to_owned())
            .filter(|l| !l.is_empty())
    })
}

#[async_trait]
impl Deployment for RabbitClusterRow {
    fn worker_base(&self) -> String {
        self.url.clone()
    }

    fn direct_base(&self) -> String {
        self.url.clone()
    }

    fn counting(&self) -> String {
        "not counted: the nodes' connection counts mix the worker with the publisher, and a \
         killed node's count is gone with it"
            .into()
    }

    async fn connects(&self) -> Result<Option<u64>, String> {
        Ok(None)
    }

    async fn inject(&self, fault: &Fault) -> Result<(), String> {
        if fault.action != Action::Topology("kill-leader-node") {
            return Err(format!(
                "{:?}: not a fault of rabbitmq-cluster",
                fault.action
            ));
        }
        let leader = self.leader().await?;
        let mut cmd = self.env.command(&self.ctl);
        cmd.args(["-n", &leader, "eval", "os:getpid()."]);
        let out = brokers::run(cmd, Duration::from_secs(30)).await?;
        let pid: u32 = out
            .trim()
            .trim_matches('"')
            .parse()
            .map_err(|e| format!("os:getpid() on {leader}: {out:?}: {e}"))?;
        brokers::kill9(pid).await
    }

    async fn clear(&self, _fault: &Fault) -> Result<(), String> {
        self.env
            .brokers_sh(&["up", "rabbitmq-cluster"], Duration::from_secs(300))
            .await?;
        nodes::until(
            "the queue led by a running node",
            Duration::from_secs(60),
            || async { self.leader().await.map(|_| ()) },
        )
        .await
    }

    async fn teardown(&self) {
        let _ = self
            .env
            .brokers_sh(&["up", "rabbitmq-cluster"], Duration::from_secs(300))
            .await;
        for q in [self.queue.clone(), Broker::Rabbitmq.dlq(&self.queue)] {
            let _ = self.ctl(&["delete_queue", &q]).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_is_read_from_list_queues() {
        let list = "other\tbq-ha-1@localhost\nq1\tbq-ha-3@localhost\nclassic\t\n";
        assert_eq!(leader_of(list, "q1").as_deref(), Some("bq-ha-3@localhost"));
        assert_eq!(leader_of(list, "classic"), None, "no leader");
        assert_eq!(leader_of(list, "q"), None, "a whole name");
    }
}
