//! `kafka`: the Kafka node of `scripts/brokers.sh up kafka-proxied` behind a Toxiproxy proxy,
//! with the four network faults of the other single brokers.
//!
//! A Kafka client bootstraps on one address and then connects to the address the broker
//! advertises, so a proxy in front of a plain broker would carry the bootstrap request only.
//! That node advertises, on its `PROXIED` listener, a port P no one listens on until a row
//! creates its proxy there (listen P, upstream the listener's own port): the worker bootstraps
//! on P, is told P, and every connection it opens goes through the proxy. Its `DIRECT` listener
//! advertises itself: the publisher, the lag count and the probe use it, around the fault.
//!
//! P is fixed for as long as the node runs, so the rows of this topology run one after another
//! (one lane, as every topology) and each creates its proxy on P and deletes it after the row.
//! The proxy is named after the row, as the others', so its accepted clients are the row's.

use std::time::Duration;

use async_trait::async_trait;

use super::faults::{self, Fault};
use super::proxied::ProxiedRow;
use super::toxiproxy::Toxiproxy;
use super::{Deployment, Topology};
use crate::brokers::{Broker, Env};

/// The recovery bound of the reset (see [`KafkaProxied::faults`]).
const RESET_BOUND: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub(crate) struct KafkaProxied;

#[async_trait]
impl Topology for KafkaProxied {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn broker(&self) -> Broker {
        Broker::Kafka
    }

    fn components(&self) -> &'static [&'static str] {
        &["kafka-proxied", "toxiproxy"]
    }

    /// The network faults, the reset with a bound of its own: the reset (3 s) outlasts the
    /// worker's group session (`session.timeout.ms=2000`, the chaos workers' setting), so the
    /// coordinator evicts the member; after the clearing the worker waits out librdkafka's
    /// reconnect back-off to the coordinator, rejoins the group and fetches from the committed
    /// offset. Measured on the 2-core test machine: 5.6 to 9.9 s over eight rows (docs/ha.md);
    /// the bound is about three times the slowest. The other single brokers keep theirs.
    fn faults(&self, short: bool) -> Vec<Fault> {
        let mut faults = faults::network(short);
        for fault in &mut faults {
            if fault.name == "reset" {
                fault.recovery_bound = RESET_BOUND;
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
            env.var(key)
                .map(str::to_owned)
                .ok_or_else(|| format!("{key} is not set: scripts/brokers.sh up kafka-proxied"))
        };
        let direct = var("BQ_KAFKA_PROXIED_URL")?;
        let listen = var("BQ_KAFKA_PROXIED_LISTEN")?;
        let upstream = var("BQ_KAFKA_PROXIED_UPSTREAM")?;
        let proxy = Toxiproxy::from_env(env)?;
        // The node advertises exactly this port: a proxy an interrupted run left on it goes.
        proxy.free_listen(&listen).await?;
        let made = proxy.create_proxy(row, &listen, &upstream).await?;
        if made != listen {
            let _ = proxy.delete_proxy(row).await;
            return Err(format!(
                "toxiproxy: proxy {row} listens on {made}, the node advertises {listen}"
            ));
        }
        let worker = format!("kafka://{listen}");
        Ok(Box::new(ProxiedRow::new(
            proxy, row, &listen, &direct, &worker,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reset_has_a_bound_of_its_own() {
        for short in [true, false] {
            let ours = KafkaProxied.faults(short);
            let theirs = faults::network(short);
            assert_eq!(ours.len(), theirs.len());
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a.name, b.name);
                assert_eq!(a.storm_threshold, b.storm_threshold);
                if a.name == "reset" {
                    assert_eq!(a.recovery_bound, RESET_BOUND);
                } else {
                    assert_eq!(a, b);
                }
            }
        }
    }
}
