//! A single broker of `scripts/brokers.sh` behind a Toxiproxy proxy of the row's own: the worker
//! connects through the proxy, the publisher, the broker-side count and the probe go straight to
//! the broker. The network faults are toxics on that proxy; the worker's connections are the
//! proxy's accepted clients (nothing else connects through it). The `kafka` and `pulsar`
//! topologies (`advertised.rs`) use the same row on a proxy at the port their broker advertises.

use async_trait::async_trait;

use super::faults::{self, Action, Fault};
use super::toxiproxy::{self, Toxiproxy};
use super::{Deployment, Topology};
use crate::brokers::{Broker, Env};

/// `redis`, `redis-laravel` (the same Redis, the Laravel layout), `rabbitmq`, `nats`, `artemis`
/// (AMQP 1.0) or `sqs` (moto, HTTP: the proxy is in front of the URL's `endpoint=`), behind
/// Toxiproxy. (Kafka and Pulsar cannot sit behind a proxy in front of a plain broker: their
/// clients are sent on to the address the broker advertises, so the worker's traffic would go
/// around it. Kafka and Pulsar have topologies of their own, whose brokers advertise the proxy.)
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
            Broker::Artemis => &["artemis", "toxiproxy"],
            Broker::Sqs => &["sqs", "toxiproxy"],
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
        let front = Front::of(self.broker, &direct)?;
        let listen = proxy
            .create_proxy(row, "127.0.0.1:0", &front.upstream)
            .await?;
        let worker = front.worker(&listen)?;
        Ok(Box::new(ProxiedRow {
            proxy,
            name: row.to_owned(),
            listen,
            direct,
            worker,
            per_request: self.broker == Broker::Sqs,
        }))
    }
}

/// A forwarder in front of a broker: the `host:port` it forwards to, and the worker's URL through
/// it. For SQS it stands in for the HTTP endpoint the URL's `endpoint=` names.
#[derive(Debug, Clone)]
pub(super) struct Front {
    direct: String,
    /// The URL whose authority the forwarder replaces (the broker URL, or SQS' endpoint).
    proxied: String,
    pub(super) upstream: String,
}

impl Front {
    pub(super) fn of(broker: Broker, direct: &str) -> Result<Front, String> {
        let proxied = match broker {
            Broker::Sqs => sqs_endpoint(direct)?.to_owned(),
            _ => direct.to_owned(),
        };
        let default_port = match broker {
            Broker::Rabbitmq | Broker::Artemis => 5672,
            Broker::Nats => 4222,
            Broker::Sqs => 80,
            _ => 6379,
        };
        let upstream = toxiproxy::authority(&proxied, default_port)?;
        Ok(Front {
            direct: direct.to_owned(),
            proxied,
            upstream,
        })
    }

    /// The worker's URL through a forwarder listening on `listen`.
    pub(super) fn worker(&self, listen: &str) -> Result<String, String> {
        let through = toxiproxy::redirect(&self.proxied, listen)?;
        Ok(self.direct.replacen(&self.proxied, &through, 1))
    }
}

/// The `endpoint=` of an `sqs://region?endpoint=http://host:port` URL (as written: the test
/// endpoint is not percent-encoded).
fn sqs_endpoint(url: &str) -> Result<&str, String> {
    let (_, query) = url
        .split_once('?')
        .ok_or_else(|| format!("no endpoint= in {url}: SQS itself cannot be proxied"))?;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("endpoint="))
        .filter(|e| e.starts_with("http://"))
        .ok_or_else(|| format!("no http:// endpoint= in {url}: SQS itself cannot be proxied"))
}

/// One row's proxy.
#[derive(Debug)]
pub(super) struct ProxiedRow {
    proxy: Toxiproxy,
    name: String,
    listen: String,
    direct: String,
    worker: String,
    /// Whether the server closes every connection after its response (moto's HTTP server sends
    /// `Connection: close`): then the proxy's count is a count of requests, not of reconnections,
    /// and says nothing of a storm.
    per_request: bool,
}

impl ProxiedRow {
    /// A row of a proxy `name` that listens on `listen`: the worker connects to `worker`, the
    /// rest to `direct`; the proxy's accepted clients are the worker's connections.
    pub(super) fn new(
        proxy: Toxiproxy,
        name: &str,
        listen: &str,
        direct: &str,
        worker: &str,
    ) -> ProxiedRow {
        ProxiedRow {
            proxy,
            name: name.to_owned(),
            listen: listen.to_owned(),
            direct: direct.to_owned(),
            worker: worker.to_owned(),
            per_request: false,
        }
    }

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
        if self.per_request {
            return format!(
                "not counted: the server behind proxy {} closes every connection after its \
                 response (Connection: close), so each request is a connection",
                self.name
            );
        }
        format!(
            "counted at Toxiproxy: its log's \"Accepted client\" lines for proxy {} on {}, \
             which only the worker connects through",
            self.name, self.listen
        )
    }

    async fn connects(&self) -> Result<Option<u64>, String> {
        if self.per_request {
            return Ok(None);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sqs_worker_goes_to_the_proxy_through_its_endpoint() {
        let direct = "sqs://us-east-1?endpoint=http://127.0.0.1:5000&visibility_timeout=2";
        let front = Front::of(Broker::Sqs, direct).unwrap();
        assert_eq!(front.upstream, "127.0.0.1:5000");
        assert_eq!(
            front.worker("127.0.0.1:41000").as_deref(),
            Ok("sqs://us-east-1?endpoint=http://127.0.0.1:41000&visibility_timeout=2")
        );
        assert!(
            Front::of(Broker::Sqs, "sqs://us-east-1").is_err(),
            "real SQS"
        );
        let front = Front::of(Broker::Artemis, "artemis://bq:bq@127.0.0.1:5673").unwrap();
        assert_eq!(front.upstream, "127.0.0.1:5673");
        assert_eq!(
            front.worker("127.0.0.1:41001").as_deref(),
            Ok("artemis://bq:bq@127.0.0.1:41001")
        );
        let front = Front::of(Broker::Redis, "redis://127.0.0.1").unwrap();
        assert_eq!(front.upstream, "127.0.0.1:6379", "the scheme's port");
    }
}
