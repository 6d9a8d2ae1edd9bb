//! `nats-cluster`: the three JetStream servers of `scripts/brokers.sh up nats-cluster`, the
//! row's stream replicated on all three (`replicas=3`). Its fault `leader-kill` SIGKILLs the
//! server that leads the stream while messages flow; the other two elect a new leader; `clear`
//! starts the killed server again (`scripts/brokers.sh up nats-cluster` starts only the missing
//! one, with its own config and store) and waits until the stream has a leader and both
//! followers are current.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;

use super::faults::{Action, Fault};
use super::nodes;
use super::{Deployment, Topology};
use crate::brokers::{self, Broker, Env, nats};

#[derive(Debug)]
pub(crate) struct NatsCluster;

#[async_trait]
impl Topology for NatsCluster {
    fn name(&self) -> &'static str {
        "nats-cluster"
    }

    fn broker(&self) -> Broker {
        Broker::Nats
    }

    fn components(&self) -> &'static [&'static str] {
        &["nats-cluster"]
    }

    /// The recovery bound: nats-server's Raft election timeout is 4 to 9 s, and a pull lost
    /// with a connection can wait out its expiry; at least three times the slowest
    /// recovery measured on the 2-core test machine (docs/ha.md).
    /// The server stays down longer than an election takes, so the recovery is the survivors',
    /// not the restart's.
    fn faults(&self, short: bool) -> Vec<Fault> {
        let hold = Duration::from_secs(if short { 10 } else { 15 });
        vec![Fault::topology(
            "leader-kill",
            format!(
                "SIGKILL of the server leading the row's R3 stream; started again after {}s",
                hold.as_secs()
            ),
            "kill-stream-leader",
            hold,
            Duration::from_secs(30),
        )]
    }

    fn in_short(&self) -> bool {
        true
    }

    async fn deploy(
        &self,
        env: &Env,
        _row: &str,
        queue: &str,
    ) -> Result<Box<dyn Deployment>, String> {
        let var = |key: &str| nodes::required(env, key, "nats-cluster");
        let url = var("BQ_NATS_CLUSTER_URL")?;
        let dir = PathBuf::from(var("BQ_NATS_CLUSTER_DIR")?);
        // A row starts on a whole cluster (the previous row's kill may have left one missing).
        env.brokers_sh(&["up", "nats-cluster"], Duration::from_secs(120))
            .await?;
        let sep = if url.contains('?') { '&' } else { '?' };
        Ok(Box::new(NatsClusterRow {
            env: env.clone(),
            url: format!("{url}{sep}replicas=3"),
            queue: queue.to_owned(),
            dir,
        }))
    }
}

#[derive(Debug)]
struct NatsClusterRow {
    env: Env,
    /// The cluster's URL with `replicas=3`.
    url: String,
    queue: String,
    /// The servers' directories (`<name>/nats.pid`, `<name>/nats.conf`).
    dir: PathBuf,
}

impl NatsClusterRow {
    /// The pid of server `name`, when the process in its pid file is the one started with its
    /// config (a recycled pid is never killed).
    fn pid(&self, name: &str) -> Result<u32, String> {
        let pid = nodes::live_pid(&self.dir.join(name).join("nats.pid"))
            .ok_or_else(|| format!("server {name} is not running"))?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let config = self.dir.join(name).join("nats.conf");
        if String::from_utf8_lossy(&cmdline).contains(&*config.to_string_lossy()) {
            Ok(pid)
        } else {
            Err(format!("pid {pid} is not server {name}"))
        }
    }

    /// Starts the killed server again; with `settle`, waits until the stream has a leader and
    /// both followers are current.
    async fn restart(&self, settle: bool) -> Result<(), String> {
        self.env
            .brokers_sh(&["up", "nats-cluster"], Duration::from_secs(120))
            .await?;
        if !settle {
            return Ok(());
        }
        nodes::until(
            "the stream led, both followers current",
            Duration::from_secs(60),
            || async {
                let (leader, current) = nats::stream_leader(&self.url, &self.queue).await?;
                if current >= 2 {
                    Ok(())
                } else {
                    Err(format!("led by {leader}, {current} followers current"))
                }
            },
        )
        .await
    }
}

#[async_trait]
impl Deployment for NatsClusterRow {
    fn worker_base(&self) -> String {
        self.url.clone()
    }

    fn direct_base(&self) -> String {
        self.url.clone()
    }

    fn counting(&self) -> String {
        "not counted: a server's connection counts mix the worker with the publisher and the \
         harness' own clients, and a killed server's count is gone with it"
            .into()
    }

    async fn connects(&self) -> Result<Option<u64>, String> {
        Ok(None)
    }

    async fn inject(&self, fault: &Fault) -> Result<(), String> {
        if fault.action != Action::Topology("kill-stream-leader") {
            return Err(format!("{:?}: not a fault of nats-cluster", fault.action));
        }
        // The publisher has created the stream by now (the worker handled a message); its
        // replicas are in sync before the kill, so the kill is of a healthy R3 stream.
        let (leader, current) = nats::stream_leader(&self.url, &self.queue).await?;
        if current < 2 {
            return Err(format!(
                "the stream is led by {leader} with only {current} followers current"
            ));
        }
        let pid = self.pid(&leader)?;
        brokers::kill9(pid).await
    }

    async fn clear(&self, _fault: &Fault) -> Result<(), String> {
        self.restart(true).await
    }

    async fn teardown(&self) {
        // Whatever happened, the next row finds three servers.
        let _ = self.restart(false).await;
        let _ = nats::delete_stream(&self.url, &self.queue).await;
    }
}
