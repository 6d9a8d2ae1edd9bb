//! What the examples share: the message they exchange and their command line. The examples
//! themselves (`producer.rs`, `worker.rs`) show the library; this file only keeps them short.
//!
//! ```text
//! producer [--url URL] [--queue NAME] [--count N]
//! worker   [--url URL] [--queue NAME] [--count N] [--timeout SECONDS]
//! ```
//!
//! `producer` publishes `N` orders (default 10) to the queue (default `examples-orders`).
//! `worker` handles orders until it has handled `N`, then exits with status 0; when the queue
//! stays idle for `--timeout` seconds (default 60) first, it exits with status 1. The URL is
//! `--url`, else the `BQ_URL` variable; `scripts/brokers.sh env` prints each local broker's as
//! `BQ_<BROKER>_URL`. The same two programs run on every broker; only the URL differs:
//!
//! | broker | URL (feature) | what to know |
//! |---|---|---|
//! | Redis | `redis://host:port`, `rediss://` for TLS (`redis`) | the reliable layout: a worker reserves each message, and a worker that dies leaves its reservation to be swept back to the queue |
//! | RabbitMQ | `amqp://user:password@host:port/vhost`, `amqps://` for TLS, `%2f` is the vhost `/` (`amqp`) | a publish returns once the broker confirmed it (publisher confirms) |
//! | Amazon SQS | `sqs://REGION`, `?endpoint=URL` for a local server (`sqs`) | credentials from the usual AWS chain (environment, profile, web identity, instance role); queues are infrastructure: create the queue and its `<queue>-dlq` before the first publish (`cargo xtask examples` creates them on moto) |
//! | Apache Kafka | `kafka://host:port[?group_id=NAME]` (`kafka`) | the queue is the topic; workers share the consumer group (default `babelqueue`) and commit an offset only after the record was handled; a retry needs retry tiers (`?retry_tiers_ms=default`, see the transport's docs), without them the worker allows one attempt and a failed record goes to the dead-letter topic |
//! | ActiveMQ Artemis | `artemis://user:password@host:port`, `artemis+ssl://` for TLS (`artemis`) | the queue is an anycast address; a redelivery carries the broker's delivery count, which the runtime reconciles with the envelope's `attempts` |
//! | Apache Pulsar | `pulsar://host:port`, `pulsar+ssl://` for TLS (`pulsar`) | the queue is a topic; workers share one subscription (default `babelqueue`) that starts at the earliest retained message, so the worker sees what was produced before it subscribed; retries wait through delayed delivery |
//! | NATS JetStream | `nats://host:port` (`nats`) | each queue is a JetStream stream with a durable pull consumer that workers share; a retry is a delayed negative acknowledgement |
//! | Azure Service Bus | `sb://NAMESPACE.servicebus.windows.net` (`asb`) | the key comes from `AZURE_SERVICEBUS_CONNECTION_STRING`, or from the URL (`sb://KEY_NAME:URL_ENCODED_KEY@NAMESPACE...`); messages are received in PeekLock mode and settled after the handler. CI builds this but cannot run it: no Service Bus is reachable there, and the transport is tested through its client trait with a PeekLock fake instead |
//!
//! ```
//! use babelqueue_examples::{Args, Role};
//!
//! let args = Args::parse(["--count", "3"], Role::Worker, Some("redis://127.0.0.1:6379".into()))?;
//! assert_eq!((args.count, args.url.as_str()), (3, "redis://127.0.0.1:6379"));
//! # Ok::<(), String>(())
//! ```

// This library is the examples' command line: telling the person at the terminal what went
// wrong, or what the worker did, is its job.
#![allow(clippy::print_stderr)]

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The message every example sends: `{"order_id": N}` under `urn:babel:orders:created`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Order {
    /// The order's number.
    pub order_id: u64,
}

impl babelqueue::Message for Order {
    const URN: &'static str = "urn:babel:orders:created";
}

/// Which program is parsing its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Publishes `count` orders.
    Producer,
    /// Handles `count` orders, or fails after `timeout` without one; the only one that takes
    /// `--timeout`.
    Worker,
}

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The broker URL handed to [`babelqueue::connect`].
    pub url: String,
    /// The queue (a topic on Kafka and Pulsar, a stream's subject on NATS).
    pub queue: String,
    /// How many orders to publish, or to handle before exiting.
    pub count: u64,
    /// How long the worker waits for the next order before it gives up.
    pub timeout: Duration,
}

/// The variable the URL comes from when there is no `--url`.
pub const URL_VAR: &str = "BQ_URL";

impl Role {
    fn usage(self) -> &'static str {
        match self {
            Role::Producer => "usage: producer [--url URL] [--queue NAME] [--count N]",
            Role::Worker => {
                "usage: worker [--url URL] [--queue NAME] [--count N] [--timeout SECONDS]"
            }
        }
    }
}

impl Args {
    /// Reads the process's arguments and `BQ_URL`; prints the usage and exits with status 2
    /// when they are wrong.
    pub fn from_env(role: Role) -> Args {
        let env_url = std::env::var(URL_VAR).ok().filter(|u| !u.is_empty());
        match Args::parse(std::env::args().skip(1), role, env_url) {
            Ok(args) => args,
            Err(e) => {
                eprintln!("{e}\n{}", role.usage());
                std::process::exit(2)
            }
        }
    }

    /// Parses `args` (without the program name) for `role`. The URL is `--url`, else
    /// `env_url`; there is no default broker.
    pub fn parse<I, S>(args: I, role: Role, env_url: Option<String>) -> Result<Args, String>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut it = args.into_iter().map(Into::into);
        let mut url = env_url;
        let mut args = Args {
            url: String::new(),
            queue: "examples-orders".to_owned(),
            count: 10,
            timeout: Duration::from_secs(60),
        };
        while let Some(flag) = it.next() {
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|_| format!("{flag} takes a whole number, got {value:?}"))
            };
            match flag.as_str() {
                "--url" => url = Some(value.clone()),
                "--queue" => args.queue.clone_from(&value),
                "--count" => args.count = number()?,
                "--timeout" if role == Role::Worker => {
                    args.timeout = Duration::from_secs(number()?);
                }
                _ => return Err(format!("unknown argument {flag:?}")),
            }
        }
        args.url = url.ok_or_else(|| format!("no broker URL: pass --url or set {URL_VAR}"))?;
        Ok(args)
    }
}

/// Counts the orders a worker handled and turns the count into the exit status.
#[derive(Debug, Clone, Default)]
pub struct Tally(Arc<AtomicU64>);

impl Tally {
    /// Counts one handled order.
    pub fn add(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    /// Orders handled so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// Status 0 when at least `want` orders were handled, else 1, with a line that says which.
    pub fn verdict(&self, want: u64) -> ExitCode {
        let got = self.count();
        if got >= want {
            eprintln!("worker: handled {got} of {want} orders");
            ExitCode::SUCCESS
        } else {
            eprintln!("worker: handled only {got} of {want} orders before the queue went idle");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_flag() {
        let args = Args::parse(
            [
                "--url",
                "nats://h:1",
                "--queue",
                "q",
                "--count",
                "7",
                "--timeout",
                "5",
            ],
            Role::Worker,
            Some("redis://d".into()),
        )
        .unwrap();
        assert_eq!(
            args,
            Args {
                url: "nats://h:1".into(),
                queue: "q".into(),
                count: 7,
                timeout: Duration::from_secs(5),
            }
        );
    }

    #[test]
    fn the_url_comes_from_the_flag_else_the_variable() {
        let from_var = Args::parse(["--count", "1"], Role::Producer, Some("kafka://k".into()));
        assert_eq!(from_var.unwrap().url, "kafka://k");
        let nowhere = Args::parse(["--count", "1"], Role::Producer, None);
        assert!(nowhere.unwrap_err().contains("BQ_URL"));
    }

    #[test]
    fn rejects_an_unknown_flag_a_bad_number_and_a_producer_timeout() {
        let parse = |a: &[&str], role| Args::parse(a.iter().copied(), role, Some("x://".into()));
        assert!(parse(&[], Role::Worker).is_ok());
        assert!(parse(&["work"], Role::Worker).is_err());
        assert!(parse(&["--max", "1"], Role::Worker).is_err());
        assert!(parse(&["--count", "ten"], Role::Worker).is_err());
        assert!(parse(&["--count"], Role::Worker).is_err());
        assert!(parse(&["--timeout", "3"], Role::Producer).is_err());
    }

    #[test]
    fn the_verdict_fails_short_of_the_count() {
        let tally = Tally::default();
        tally.add();
        assert_eq!(tally.verdict(2), ExitCode::FAILURE);
        tally.add();
        assert_eq!(tally.verdict(2), ExitCode::SUCCESS);
    }
}
