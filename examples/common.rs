//! What the broker examples share: the message they exchange and the command line each of
//! them takes. The examples themselves (`redis.rs`, `kafka.rs`, ...) show the library; this
//! file only keeps them short.
//!
//! Every example is one program with two modes:
//!
//! ```text
//! <example> produce [--url URL] [--queue NAME] [--count N]
//! <example> work    [--url URL] [--queue NAME] [--count N] [--timeout SECONDS]
//! ```
//!
//! `produce` publishes `N` orders. `work` handles orders until it has handled `N`, then exits
//! with status 0; when the queue stays idle for `--timeout` seconds (default 60) first, it exits
//! with status 1. The URL defaults to the broker's `BQ_*_URL` variable (what
//! `scripts/brokers.sh env` prints), else to the broker's usual local address.
//!
//! ```
//! use babelqueue_examples::{Args, Mode};
//!
//! let args = Args::parse(["work", "--count", "3"], "BQ_EXAMPLE_UNSET_URL", "redis://127.0.0.1:6379")?;
//! assert_eq!(args.mode, Mode::Work);
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

/// Which half of the example runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Publish `count` orders.
    Produce,
    /// Handle `count` orders, or fail after `timeout` without one.
    Work,
}

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// Produce or work.
    pub mode: Mode,
    /// The broker URL handed to [`babelqueue::connect`].
    pub url: String,
    /// The queue (a topic on Kafka and Pulsar, a stream's subject on NATS).
    pub queue: String,
    /// How many orders to publish, or to handle before exiting.
    pub count: u64,
    /// How long the worker waits for the next order before it gives up.
    pub timeout: Duration,
}

const USAGE: &str =
    "usage: <example> produce|work [--url URL] [--queue NAME] [--count N] [--timeout SECONDS]";

impl Args {
    /// Reads the process's arguments; prints the usage and exits with status 2 when they are
    /// wrong.
    pub fn from_env(url_var: &str, default_url: &str) -> Args {
        match Args::parse(std::env::args().skip(1), url_var, default_url) {
            Ok(args) => args,
            Err(e) => {
                eprintln!("{e}\n{USAGE}");
                std::process::exit(2)
            }
        }
    }

    /// Parses `args` (without the program name). The URL is `--url`, else the environment
    /// variable `url_var`, else `default_url`.
    pub fn parse<I, S>(args: I, url_var: &str, default_url: &str) -> Result<Args, String>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut it = args.into_iter().map(Into::into);
        let mode = match it.next().as_deref() {
            Some("produce") => Mode::Produce,
            Some("work") => Mode::Work,
            other => return Err(format!("expected `produce` or `work`, got {other:?}")),
        };
        let mut args = Args {
            mode,
            url: std::env::var(url_var).unwrap_or_else(|_| default_url.to_owned()),
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
                "--url" => args.url.clone_from(&value),
                "--queue" => args.queue.clone_from(&value),
                "--count" => args.count = number()?,
                "--timeout" => args.timeout = Duration::from_secs(number()?),
                _ => return Err(format!("unknown argument {flag:?}")),
            }
        }
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
                "produce",
                "--url",
                "nats://h:1",
                "--queue",
                "q",
                "--count",
                "7",
                "--timeout",
                "5",
            ],
            "BQ_EXAMPLE_UNSET_URL",
            "redis://d",
        )
        .unwrap();
        assert_eq!(
            args,
            Args {
                mode: Mode::Produce,
                url: "nats://h:1".into(),
                queue: "q".into(),
                count: 7,
                timeout: Duration::from_secs(5),
            }
        );
    }

    #[test]
    fn rejects_a_missing_mode_an_unknown_flag_and_a_bad_number() {
        let parse = |a: &[&str]| Args::parse(a.iter().copied(), "BQ_EXAMPLE_UNSET_URL", "x://");
        assert!(parse(&[]).is_err());
        assert!(parse(&["consume"]).is_err());
        assert!(parse(&["work", "--max", "1"]).is_err());
        assert!(parse(&["work", "--count", "ten"]).is_err());
        assert!(parse(&["work", "--count"]).is_err());
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
