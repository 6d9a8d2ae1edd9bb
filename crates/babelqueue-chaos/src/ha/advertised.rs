//! `kafka` and `pulsar`: a broker of its own (`scripts/brokers.sh up kafka-proxied`, `up
//! pulsar-proxied`) behind a Toxiproxy proxy, with the four network faults of the other single
//! brokers.
//!
//! A Kafka client bootstraps on one address, a Pulsar client looks its topic up on its service
//! URL, and both then connect to the address the broker advertises: a proxy in front of a
//! plain broker would carry the bootstrap request or the lookup only. These brokers advertise,
//! on one listener (Kafka's `PROXIED`, Pulsar's `proxied`), a port P no one listens on until a
//! row creates its proxy there (listen P, upstream the listener's own port): the worker
//! connects to P, is sent to P again, and every connection it opens goes through the proxy.
//! Their other listener (`DIRECT`, `direct`) advertises itself: the publisher, the broker-side
//! count and the probe use it, around the fault.
//!
//! P is fixed for as long as the broker runs, so the rows of a topology run one after another
//! (one lane, as every topology) and each creates its proxy on P and deletes it after the row.
//! The proxy is named after the row, as the others', so its accepted clients are the row's.

use std::time::Duration;

use async_trait::async_trait;

use super::faults::{self, Fault};
use super::proxied::ProxiedRow;
use super::toxiproxy::Toxiproxy;
use super::{Deployment, Topology};
use crate::brokers::{Broker, Env};

/// A broker that advertises the proxy in front of it: where `scripts/brokers.sh env` says it is.
#[derive(Debug)]
pub(crate) struct Advertised {
    name: &'static str,
    broker: Broker,
    /// The `scripts/brokers.sh` component of the broker, then `toxiproxy`.
    components: &'static [&'static str; 2],
    /// The variables of its `env`: the direct URL, the advertised proxy address (P) and the
    /// proxied listener's own address (the proxy's upstream).
    direct: &'static str,
    listen: &'static str,
    upstream: &'static str,
    /// The worker's URL scheme (`kafka://`, `pulsar://`).
    scheme: &'static str,
    /// The reset's recovery bound, when the broker's client needs one of its own.
    reset_bound: Option<Duration>,
}

/// Kafka's reset bound: the reset (3 s) outlasts the worker's group session
/// (`session.timeout.ms=2000`, the chaos workers' setting), so the coordinator evicts the
/// member; after the clearing the worker waits out librdkafka's reconnect back-off to the
/// coordinator, rejoins the group and fetches from the committed offset. Measured on the
/// 2-core test machine: 5.6 to 9.9 s over eight rows (docs/ha.md); the bound is about three
/// times the slowest. The other single brokers keep theirs.
const KAFKA_RESET_BOUND: Duration = Duration::from_secs(30);

/// The KRaft node of `ha-kafka-proxied.sh`.
pub(crate) const KAFKA: Advertised = Advertised {
    name: "kafka",
    broker: Broker::Kafka,
    components: &["kafka-proxied", "toxiproxy"],
    direct: "BQ_KAFKA_PROXIED_URL",
    listen: "BQ_KAFKA_PROXIED_LISTEN",
    upstream: "BQ_KAFKA_PROXIED_UPSTREAM",
    scheme: "kafka",
    reset_bound: Some(KAFKA_RESET_BOUND),
};

/// The standalone of `ha-pulsar-proxied.sh`. The backlog count reads its own admin API
/// (`BQ_PULSAR_PROXIED_ADMIN_URL`, see `brokers::pulsar_admin`).
pub(crate) const PULSAR: Advertised = Advertised {
    name: "pulsar",
    broker: Broker::Pulsar,
    components: &["pulsar-proxied", "toxiproxy"],
    direct: "BQ_PULSAR_PROXIED_URL",
    listen: "BQ_PULSAR_PROXIED_LISTEN",
    upstream: "BQ_PULSAR_PROXIED_UPSTREAM",
    scheme: "pulsar",
    reset_bound: None,
};

#[async_trait]
impl Topology for Advertised {
    fn name(&self) -> &'static str {
        self.name
    }

    fn broker(&self) -> Broker {
        self.broker
    }

    fn components(&self) -> &'static [&'static str] {
        self.components
    }

    /// The network faults, the reset with the broker's own bound if it has one.
    fn faults(&self, short: bool) -> Vec<Fault> {
        let mut faults = faults::network(short);
        for fault in &mut faults {
            if let (Some(bound), "reset") = (self.reset_bound, fault.name) {
                fault.recovery_bound = bound;
            }
        }
        faults
    }

    fn in_short(&self) -> bool {
        false
    }

    async fn deploy(
        &self,
        env: &Env,
        row: &str,
        _queue: &str,
    ) -> Result<Box<dyn Deployment>, String> {
        let var = |key: &str| {
            env.var(key).map(str::to_owned).ok_or_else(|| {
                format!(
                    "{key} is not set: scripts/brokers.sh up {}",
                    self.components[0]
                )
            })
        };
        let direct = var(self.direct)?;
        let listen = var(self.listen)?;
        let upstream = var(self.upstream)?;
        let proxy = Toxiproxy::from_env(env)?;
        // The broker advertises exactly this port: a proxy an interrupted run left on it goes.
        proxy.free_listen(&listen).await?;
        let made = proxy.create_proxy(row, &listen, &upstream).await?;
        if made != listen {
            let _ = proxy.delete_proxy(row).await;
            return Err(format!(
                "toxiproxy: proxy {row} listens on {made}, the broker advertises {listen}"
            ));
        }
        let worker = format!("{}://{listen}", self.scheme);
        Ok(Box::new(ProxiedRow::new(
            proxy, row, &listen, &direct, &worker,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reset_may_have_a_bound_of_its_own() {
        for topology in [KAFKA, PULSAR] {
            for short in [true, false] {
                let ours = topology.faults(short);
                let theirs = faults::network(short);
                assert_eq!(ours.len(), theirs.len());
                for (a, b) in ours.iter().zip(&theirs) {
                    assert_eq!(a.name, b.name);
                    assert_eq!(a.storm_threshold, b.storm_threshold);
                    match (a.name, topology.reset_bound) {
                        ("reset", Some(bound)) => assert_eq!(a.recovery_bound, bound),
                        _ => assert_eq!(a, b),
                    }
                }
            }
        }
    }

    #[test]
    fn each_names_its_own_component() {
        assert_eq!(KAFKA.components(), ["kafka-proxied", "toxiproxy"]);
        assert_eq!(PULSAR.components(), ["pulsar-proxied", "toxiproxy"]);
        assert_eq!(PULSAR.broker(), Broker::Pulsar);
    }
}
