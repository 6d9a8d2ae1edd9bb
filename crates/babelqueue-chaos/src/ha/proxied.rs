//! A single broker of `scripts/brokers.sh` behind a Toxiproxy proxy of the row's own: the worker
//! connects through the proxy, the publisher, the broker-side count and the probe go straight to
//! the broker. The network faults are toxics on that proxy; the worker's connections are the
//! proxy's accepted clients (nothing else connects through it).

use async_trait::async_trait;

use super::faults::{self, Action, Fault};
use super::toxiproxy::{self, Toxiproxy};
use super::{Deployment, Topology};
use crate::brokers::{Broker, Env};

/// `redis`, `redis-laravel` (the same Redis, the Laravel layout), `rabbitmq` or `nats`, behind
/// Toxiproxy. (Kafka and Pulsar cannot sit behind a plain TCP proxy: their clients are sent on
/// to the address the broker advertises.)
#[derive(Debug, Clone, Copy)]
pub(crate) struct Proxied {
    broker: Broker,
    in_short: bool,
}

impl Proxied {
    /// `in_short`: whether the CI subset (`--ha --short`) runs it.
    pub(crate) fn new(broker: Broker, in_short: bool) -> Proxied {
        Proxied { broker, in_short }
    }

    fn default_port(self) -> u16 {
        match self.broker {
            Broker::Rabbitmq => 5672,
            Broker::Nats => 4222,
            _ => 6379,
        }
    }
}

#[async_trait]
impl Topology for Proxied {
    fn name(&self) -> &'static str {
        self.broker.name()
    }

    fn broker(&self) -> Broker {
        self.broker
    }

    fn components(&self) -> &'static [&'static str] {
        match self.broker {
            Broker::Rabbitmq => &["rabbitmq", "toxiproxy"],
            Broker::Nats => &["nats", "toxiproxy"],
            _ => &["redis", "toxiproxy"],
        }
    }

    fn faults(&self, short: bool) -> Vec<Fault> {
        faults::network(short)
    }

    fn in_short(&self) -> bool {
        self.in_short
    }

    async fn deploy(
        &self,
        env: &Env,
        row: &str,
        _queue: &str,
    ) -> Result<Box<dyn Deployment>, String> {
        let proxy = Toxiproxy::from_env(env)?;
        let direct = env.base_url(self.broker)?;
        let upstream = toxiproxy::authority(&direct, self.default_port())?;
        let listen = proxy.create_proxy(row, &upstream).await?;
        let worker = toxiproxy::redirect(&direct, &listen)?;
        Ok(Box::new(ProxiedRow {
            proxy,
            name: row.to_owned(),
            listen,
            direct,
            worker,
        }))
    }
}

/// One row's proxy.
#[derive(Debug)]
struct ProxiedRow {
    proxy: Toxiproxy,
    name: String,
    listen: String,
    direct: String,
    worker: String,
}

impl ProxiedRow {
    fn toxics(fault: &Fault) -> Result<&[faults::Toxic], String> {
        match &fault.action {
            Action::Toxics(toxics) => Ok(toxics),
            Action::Topology(what) => Err(format!(
                "{what}: not a fault a single broker behind Toxiproxy can take"
            )),
        }
    }
}

#[async_trait]
impl Deployment for ProxiedRow {
    fn worker_base(&self) -> String {
        self.worker.clone()
    }

    fn direct_base(&self) -> String {
        self.direct.clone()
    }

    fn counting(&self) -> String {
        format!(
            "counted at Toxiproxy: its log's \"Accepted client\" lines for proxy {} on {}, \
             which only the worker connects through",
            self.name, self.listen
        )
    }

    async fn connects(&self) -> Result<Option<u64>, String> {
        self.proxy.accepted(&self.name).await.map(Some)
    }

    async fn inject(&self, fault: &Fault) -> Result<(), String> {
        for toxic in Self::toxics(fault)? {
            self.proxy.add_toxic(&self.name, toxic).await?;
        }
        Ok(())
    }

    async fn clear(&self, fault: &Fault) -> Result<(), String> {
        let mut problems = Vec::new();
        for toxic in Self::toxics(fault)?.iter().rev() {
            if let Err(e) = self.proxy.remove_toxic(&self.name, toxic).await {
                problems.push(e);
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    async fn teardown(&self) {
        // Deleting the proxy drops its toxics and closes whatever still goes through it.
        let _ = self.proxy.delete_proxy(&self.name).await;
    }
}
