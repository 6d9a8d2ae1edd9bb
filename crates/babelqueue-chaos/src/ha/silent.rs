//! A single broker of `scripts/brokers.sh` behind a [`Freezer`] of the row's own: the `silent`
//! fault freezes every connection the worker has open (each byte dropped both ways, nothing ever
//! closed) while new connections pass. Unlike Toxiproxy's black hole, whose removal closes the
//! connections and so tells the client, only the worker's own liveness check can end it: the
//! row shows how long that takes. Recovery is measured from the freeze to the first handler call
//! of a message published after it (one only a new connection could have received).

use std::time::Duration;

use async_trait::async_trait;

use super::faults::{Action, Fault, RecoveryFrom, STORM_THRESHOLD};
use super::freezer::Freezer;
use super::proxied::Front;
use super::{Deployment, Topology};
use crate::brokers::{Broker, Env};

/// How long a row publishes after the freeze before the fault is "cleared" (clearing changes
/// nothing: the frozen connections stay frozen until the row ends).
const HOLD: Duration = Duration::from_secs(30);

/// `redis-silent`, `rabbitmq-silent`, `nats-silent`, `artemis-silent`, `sqs-silent`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Silent {
    broker: Broker,
    in_short: bool,
}

impl Silent {
    pub(crate) fn new(broker: Broker, in_short: bool) -> Silent {
        Silent { broker, in_short }
    }

    /// The bound a worker must leave its frozen connections within, from the transport's own
    /// liveness settings (docs/ha.md):
    /// * Redis: a reply may take the server's wait (at most the 0.25 s sweep interval) plus
    ///   `reply_timeout_ms` (5 s); the reconnection follows at once: bound 10 s.
    /// * RabbitMQ: lapin closes a connection after two heartbeat intervals without a byte from
    ///   the broker (the transport asks for a 10 s heartbeat: 20 s), then reconnects: bound 30 s.
    /// * NATS: async-nats reconnects after two pings without a pong (the transport pings every
    ///   10 s: 20 to 30 s), then a new pull: bound 40 s.
    /// * SQS (moto, HTTP): a response may take the long poll's wait plus 10 s before the call is
    ///   abandoned with its connection; every request opens a new connection (moto closes each
    ///   after its response), so only the requests in flight are frozen: bound 30 s.
    /// * Artemis (AMQP 1.0): the transport offers a 10 s idle timeout, after which a connection
    ///   that brought nothing is closed, then reconnects: bound 30 s, as RabbitMQ's.
    pub(crate) fn bound(broker: Broker) -> Duration {
        match broker {
            Broker::Rabbitmq | Broker::Sqs | Broker::Artemis => Duration::from_secs(30),
            Broker::Nats => Duration::from_secs(40),
            _ => Duration::from_secs(10),
        }
    }

    /// The `silent` fault of this broker.
    pub(crate) fn fault(broker: Broker) -> Fault {
        Fault {
            name: "silent",
            what: format!(
                "every connection the worker has open is frozen (each byte dropped both ways, \
                 never closed) for the rest of the row; new connections pass; publishing goes \
                 on {}s",
                HOLD.as_secs()
            ),
            action: Action::Topology("freeze"),
            hold: HOLD,
            recovery_from: RecoveryFrom::InjectFresh,
            recovery_bound: Silent::bound(broker),
            storm_threshold: STORM_THRESHOLD,
            breaks_connections: true,
        }
    }
}

#[async_trait]
impl Topology for Silent {
    fn name(&self) -> &'static str {
        match self.broker {
            Broker::Rabbitmq => "rabbitmq-silent",
            Broker::Nats => "nats-silent",
            Broker::Sqs => "sqs-silent",
            Broker::Artemis => "artemis-silent",
            _ => "redis-silent",
        }
    }

    fn broker(&self) -> Broker {
        self.broker
    }

    fn components(&self) -> &'static [&'static str] {
        match self.broker {
            Broker::Rabbitmq => &["rabbitmq"],
            Broker::Nats => &["nats"],
            Broker::Sqs => &["sqs"],
            Broker::Artemis => &["artemis"],
            _ => &["redis"],
        }
    }

    fn faults(&self, _short: bool) -> Vec<Fault> {
        vec![Silent::fault(self.broker)]
    }

    fn in_short(&self) -> bool {
        self.in_short
    }

    async fn deploy(
        &self,
        env: &Env,
        _row: &str,
        _queue: &str,
    ) -> Result<Box<dyn Deployment>, String> {
        let direct = env.base_url(self.broker)?;
        let front = Front::of(self.broker, &direct)?;
        let freezer = Freezer::start(&front.upstream).await?;
        let worker = front.worker(freezer.listen())?;
        Ok(Box::new(SilentRow {
            freezer,
            direct,
            worker,
            per_request: self.broker == Broker::Sqs,
        }))
    }
}

/// One row's forwarder.
#[derive(Debug)]
struct SilentRow {
    freezer: Freezer,
    direct: String,
    worker: String,
    /// moto closes every connection after its response: a count would be of requests (see
    /// [`super::proxied`]).
    per_request: bool,
}

#[async_trait]
impl Deployment for SilentRow {
    fn worker_base(&self) -> String {
        self.worker.clone()
    }

    fn direct_base(&self) -> String {
        self.direct.clone()
    }

    fn counting(&self) -> String {
        if self.per_request {
            return "not counted: the server closes every connection after its response \
                    (Connection: close), so each request is a connection"
                .to_owned();
        }
        format!(
            "counted by the harness' forwarder on {}, which only the worker connects through",
            self.freezer.listen()
        )
    }

    async fn connects(&self) -> Result<Option<u64>, String> {
        Ok((!self.per_request).then(|| self.freezer.accepted()))
    }

    async fn inject(&self, fault: &Fault) -> Result<(), String> {
        match fault.action {
            Action::Topology("freeze") => match self.freezer.freeze() {
                0 => Err("the worker had no connection open to freeze".into()),
                _ => Ok(()),
            },
            _ => Err(format!("{}: not a fault of a frozen forwarder", fault.name)),
        }
    }

    async fn clear(&self, _fault: &Fault) -> Result<(), String> {
        Ok(())
    }

    async fn teardown(&self) {
        // The forwarder's tasks end when the row's deployment is dropped.
    }
}
