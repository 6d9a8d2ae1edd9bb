//! `redis-sentinel`: the Sentinel topology of `scripts/brokers.sh up redis-sentinel` (one master,
//! two replicas, three sentinels, `down-after-milliseconds` 1 s). Its fault `failover` SIGKILLs
//! the master while messages flow; the sentinels promote a replica; `clear` waits until all
//! three sentinels name the new master, then starts the killed server again with its own
//! config, and waits until it has rejoined as a replica in sync.
//!
//! The worker and the publisher both find the master through the sentinels. The publisher
//! writes with `wait_replicas=1`: Redis replicates asynchronously, and a write only the dead
//! master had would be lost with it; a publish is confirmed once a replica has it (and the
//! sentinels promote the replica with the most data).

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue::redis::topology::{self, Topology as RedisTopology};

use super::faults::{Action, Fault};
use super::nodes;
use super::redis_kills::RedisKills;
use super::{Deployment, Topology};
use crate::brokers::{self, Broker, Env, redis_topology};

/// The publisher's write concern (the worker's writes need none: a lost reservation or
/// acknowledgement brings a message back, it never loses one).
const PUBLISHER_OPTIONS: &str = "wait_replicas=1&wait_timeout_ms=500";

#[derive(Debug)]
pub(crate) struct Sentinel;

#[async_trait]
impl Topology for Sentinel {
    fn name(&self) -> &'static str {
        "redis-sentinel"
    }

    fn broker(&self) -> Broker {
        Broker::Redis
    }

    fn components(&self) -> &'static [&'static str] {
        &["redis-sentinel"]
    }

    /// The recovery bound is at least three times the slowest recovery measured on the 2-core
    /// test machine (docs/ha.md): the sentinels declare the master down after 1 s, elect one of
    /// them, promote a replica, and the worker's reconnect back-off (capped at 5 s) finds it.
    fn faults(&self, short: bool) -> Vec<Fault> {
        let hold = Duration::from_secs(if short { 5 } else { 10 });
        vec![Fault::topology(
            "failover",
            format!(
                "SIGKILL of the master; started again as a replica after {}s and once the \
                 sentinels named a new master; the publisher writes with {PUBLISHER_OPTIONS}",
                hold.as_secs()
            ),
            "kill-master",
            hold,
            Duration::from_secs(15),
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
        let url = nodes::required(env, "BQ_REDIS_SENTINEL_URL", "redis-sentinel")?;
        let RedisTopology::Sentinel(parsed) = topology::parse(&url).map_err(|e| e.to_string())?
        else {
            return Err(format!("{url}: not a redis+sentinel:// URL"));
        };
        let row = SentinelRow {
            env: env.clone(),
            url,
            queue: queue.to_owned(),
            sentinels: parsed.sentinels,
            service: parsed.service,
            dir: env.brokers_dir().join("redis-sentinel"),
            kills: RedisKills::new(env.clone()),
        };
        // A row starts on a whole topology: a master with both replicas in sync.
        row.settled(None).await?;
        Ok(Box::new(row))
    }
}

#[derive(Debug)]
struct SentinelRow {
    env: Env,
    url: String,
    queue: String,
    sentinels: Vec<(String, u16)>,
    service: String,
    /// The servers' directories (`<port>/redis.conf`).
    dir: PathBuf,
    /// `redis-cli`, and the master this row killed.
    kills: RedisKills,
}

impl SentinelRow {
    /// The master each sentinel names (all must answer).
    async fn named_masters(&self) -> Result<Vec<u16>, String> {
        let mut out = Vec::new();
        for (_, port) in &self.sentinels {
            let reply = self
                .kills
                .cli(
                    *port,
                    &["SENTINEL", "get-master-addr-by-name", &self.service],
                )
                .await?;
            let (_, master) = redis_topology::master_addr(&reply)
                .ok_or_else(|| format!("sentinel :{port} names no master ({reply:?})"))?;
            out.push(master);
        }
        Ok(out)
    }

    /// Waits until every sentinel names the same master, other than `not`, and it has two
    /// replicas online; that master.
    async fn settled(&self, not: Option<u16>) -> Result<u16, String> {
        nodes::until(
            "a master all sentinels name, with two replicas online",
            Duration::from_secs(60),
            || async move {
                let named = self.named_masters().await?;
                let master = *named.first().ok_or("no sentinel")?;
                if named.iter().any(|m| *m != master) || Some(master) == not {
                    return Err(format!("the sentinels name {named:?}"));
                }
                let info = self.kills.cli(master, &["INFO", "replication"]).await?;
                if replicas_online(&info) >= 2 {
                    Ok(master)
                } else {
                    Err(format!(":{master} has fewer than two replicas online"))
                }
            },
        )
        .await
    }

    /// Starts the killed server again (its config, its port) and waits until the topology is
    /// whole, the server a replica of the new master.
    async fn restart(&self, port: u16) -> Result<(), String> {
        let new = nodes::until(
            "a new master named by every sentinel",
            Duration::from_secs(60),
            || async move {
                let named = self.named_masters().await?;
                match named.first() {
                    Some(m) if *m != port && named.iter().all(|n| n == m) => Ok(*m),
                    _ => Err(format!("the sentinels name {named:?}")),
                }
            },
        )
        .await?;
        // Only now: a server without persistence comes back empty, and an empty server the
        // sentinels still took for the master would have its replicas copy nothing.
        let conf = self.dir.join(port.to_string()).join("redis.conf");
        nodes::spawn_detached("redis-server", &[&conf.display().to_string()]).await?;
        self.kills.restarted()?;
        let master = self.settled(Some(port)).await?;
        if master != new {
            return Err(format!("the master moved again, from :{new} to :{master}"));
        }
        Ok(())
    }
}

/// The replicas an `INFO replication` reply of a master lists as online.
fn replicas_online(info: &str) -> usize {
    info.lines()
        .filter(|l| l.starts_with("slave") && l.contains("state=online"))
        .count()
}

#[async_trait]
impl Deployment for SentinelRow {
    fn worker_base(&self) -> String {
        self.url.clone()
    }

    fn direct_base(&self) -> String {
        format!("{}?{PUBLISHER_OPTIONS}", self.url)
    }

    fn counting(&self) -> String {
        "not counted: the servers' connection counts mix the worker with the publisher, the \
         replicas and the sentinels"
            .into()
    }

    async fn connects(&self) -> Result<Option<u64>, String> {
        Ok(None)
    }

    async fn inject(&self, fault: &Fault) -> Result<(), String> {
        if fault.action != Action::Topology("kill-master") {
            return Err(format!("{:?}: not a fault of redis-sentinel", fault.action));
        }
        let master = self.settled(None).await?;
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
    fn replicas_online_are_counted_from_info_replication() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
                    slave0:ip=127.0.0.1,port=40001,state=online,offset=10,lag=0\r\n\
                    slave1:ip=127.0.0.1,port=40002,state=wait_bgsave,offset=0,lag=0\r\n\
                    master_repl_offset:10\r\n";
        assert_eq!(replicas_online(info), 1);
        assert_eq!(replicas_online("role:slave\r\n"), 0);
    }
}
