//! `cargo xtask bench cli [--count N] [--broker NAME]...`: the `babelqueue publish --count N`
//! process against the library's windowed `publish_batch` in a process of its own
//! (`crates/babelqueue/benches/drivers.rs`) and the Python SDK 1.24.0 publishing N envelopes
//! one by one, each side's best of two passes taken in turn, on the local Redis
//! (both layouts), RabbitMQ and Kafka, then a drain of each queue with `babelqueue consume`
//! that must find exactly the N messages each side published (no more, no fewer).
//!
//! The CLI is timed as a whole process (starting, connecting, publishing in confirmed
//! windows, printing every envelope); the Python SDK by its publish loop alone (imports and
//! connecting excluded), so the ratio leans against the CLI. CPU is the children's
//! `cutime + cstime` (the Python process whole, imports included); the broker's CPU is read
//! from `/proc/<pid>/stat` and includes whatever else used the shared broker meanwhile.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::measure::{self, BrokerProcess, Meter};
use super::{number, python, verdict};
use crate::root;

/// Messages per run unless `--count` says otherwise.
const DEFAULT_COUNT: u64 = 20_000;

/// Runs of each side per broker; each side's fastest is shown.
const PASSES: usize = 2;

/// A broker the CLI benchmark publishes to: the `--broker` name, the environment variable of
/// its URL and the URL without it, and its process.
pub(crate) struct Target {
    pub(crate) name: &'static str,
    pub(crate) env: &'static str,
    pub(crate) default_url: &'static str,
    /// Appended to the URL (`?laravel=1`; on Kafka the drains' own consumer group).
    pub(crate) suffix: &'static str,
    pub(crate) process: BrokerProcess,
    /// Seconds of quiet that end a drain: Kafka's covers the consumer group's join (the broker
    /// waits 3 s for more members before it assigns partitions).
    pub(crate) drain_idle: &'static str,
}

pub(crate) const TARGETS: &[Target] = &[
    Target {
        name: "redis",
        env: "BQ_REDIS_URL",
        default_url: "redis://127.0.0.1:6379",
        suffix: "",
        process: measure::REDIS,
        drain_idle: "2",
    },
    Target {
        name: "redis-laravel",
        env: "BQ_REDIS_URL",
        default_url: "redis://127.0.0.1:6379",
        suffix: "?laravel=1",
        process: measure::REDIS,
        drain_idle: "2",
    },
    Target {
        name: "rabbitmq",
        env: "BQ_AMQP_URL",
        default_url: "amqp://guest:guest@127.0.0.1:5672/%2f",
        suffix: "",
        process: measure::RABBITMQ,
        drain_idle: "2",
    },
    Target {
        name: "kafka",
        env: "BQ_KAFKA_URL",
        default_url: "kafka://127.0.0.1:9092",
        suffix: "?group_id=bq-bench-drain",
        process: measure::KAFKA,
        drain_idle: "10",
    },
];

impl Target {
    pub(crate) fn url(&self) -> String {
        let base = std::env::var(self.env).unwrap_or_else(|_| self.default_url.to_owned());
        format!("{base}{}", self.suffix)
    }
}

/// One side's run: rate, cost, and how many a drain found afterwards.
struct Run {
    rate: f64,
    cost: measure::Cost,
    landed: measure::Tally,
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut count = DEFAULT_COUNT;
    let mut wanted: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--count" => {
                count = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or("--count needs a positive number")?;
            }
            "--broker" => wanted.push(it.next().ok_or("--broker needs a name")?.clone()),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    for name in &wanted {
        if !TARGETS.iter().any(|t| t.name == name) {
            return Err(format!("unknown broker {name:?}"));
        }
    }
    let cli = measure::build_cli()?;
    let drivers = measure::build_drivers()?;
    let python = python();
    if !python.exists() {
        println!(
            "  {} is missing (`scripts/brokers.sh up python`): no Python rows",
            python.display()
        );
    }
    let targets: Vec<&Target> = TARGETS
        .iter()
        .filter(|t| wanted.is_empty() || wanted.iter().any(|w| w == t.name))
        .collect();
    // Each side's best of PASSES, the sides taken in turn: a busy spell of the shared machine
    // slows one pass of each side rather than all of one side's.
    let mut best: Vec<[Option<Run>; 3]> = targets.iter().map(|_| [None, None, None]).collect();
    for pass in 1..=PASSES {
        for (t, target) in targets.iter().enumerate() {
            println!(
                "== {}: {count} messages, pass {pass} of {PASSES}",
                target.name
            );
            let url = target.url();
            let queue = format!("bq-bench-cli-{}", target.name);
            let runs = [
                Some(cli_run(&cli, target, &url, &queue, count)?),
                Some(library_run(&cli, &drivers, target, &url, &queue, count)?),
                if python.exists() {
                    Some(python_run(&cli, &python, target, &url, &queue, count)?)
                } else {
                    None
                },
            ];
            for (slot, run) in best[t].iter_mut().zip(runs) {
                if let Some(run) = run
                    && slot.as_ref().is_none_or(|b| run.rate > b.rate)
                {
                    *slot = Some(run);
                }
            }
        }
    }
    let mut rows = Vec::new();
    let mut verdicts = Vec::new();
    for (target, [ours, library, theirs]) in targets.iter().zip(&best) {
        let Some(ours) = ours else { continue };
        rows.push(row(target.name, "babelqueue publish (process)", ours, None));
        if let Some(library) = library {
            rows.push(row(
                target.name,
                "library publish_batch (process)",
                library,
                Some(ours.rate),
            ));
        }
        if let Some(theirs) = theirs {
            rows.push(row(
                target.name,
                "python SDK 1.24.0 (publish loop)",
                theirs,
                Some(ours.rate),
            ));
            verdicts.push(format!(
                "  {}: the CLI process at {:.2}x the Python SDK's publish loop{}, {}",
                target.name,
                ours.rate / theirs.rate,
                library.as_ref().map_or(String::new(), |l| format!(
                    " (the library's windowed publish_batch at {:.2}x)",
                    l.rate / theirs.rate
                )),
                verdict(ours.rate >= theirs.rate)
            ));
        }
    }
    println!();
    println!(
        "babelqueue publish --count {count} against the library and the Python SDK, each side's best of {PASSES} passes taken in turn (2 shared cores: noisy; compare ratios):"
    );
    println!(
        "{}",
        measure::table(
            &[
                "broker",
                "publisher",
                "msgs/s",
                "CLI vs it",
                "CPU-s/1000",
                "broker cores",
                "landed",
                "dup",
                "lost",
            ],
            &rows,
        )
    );
    println!("  target: the CLI at least as fast as the Python SDK:");
    for line in verdicts {
        println!("{line}");
    }
    Ok(())
}

fn row(broker: &str, who: &str, run: &Run, cli_rate: Option<f64>) -> Vec<String> {
    vec![
        broker.to_owned(),
        who.to_owned(),
        format!("{:.0}", run.rate),
        cli_rate.map_or("-".to_owned(), |c| format!("{:.2}x", c / run.rate)),
        format!("{:.3}", run.cost.cpu_per_1000(run.landed.distinct.max(1))),
        format!("{:.2}", run.cost.broker_cores(0)),
        run.landed.distinct.to_string(),
        run.landed.duplicates.to_string(),
        run.landed.lost.to_string(),
    ]
}

/// `babelqueue publish URL --queue Q --urn … --count N`, timed whole; the printed ids, then a
/// drain that must find exactly them.
fn cli_run(cli: &Path, target: &Target, url: &str, queue: &str, count: u64) -> Result<Run, String> {
    drain(cli, url, queue, target.drain_idle)?;
    let mut cmd = Command::new(cli);
    cmd.args(["publish", "--queue", queue, "--urn", "urn:babel:bench:cli"])
        .args(["--data", r#"{"order_id":1,"total":99.9,"currency":"EUR"}"#])
        .args(["--count", &count.to_string()])
        .env("BABELQUEUE_URL", url);
    let meter = Meter::start(&[target.process]);
    let out = measure::output(cmd)?;
    let cost = meter.stop();
    let printed: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| meta_id(l.as_bytes()))
        .collect();
    if printed.len() as u64 != count {
        return Err(format!(
            "the CLI printed {} distinct envelopes, not {count}",
            printed.len()
        ));
    }
    landed_run(
        "babelqueue publish",
        &printed,
        cli,
        target,
        url,
        queue,
        count,
        cost,
    )
}

/// The same windows through the library alone (`App::publish_batch` by 1 024, the process of
/// `crates/babelqueue/benches/drivers.rs`), timed whole like the CLI.
fn library_run(
    cli: &Path,
    drivers: &Path,
    target: &Target,
    url: &str,
    queue: &str,
    count: u64,
) -> Result<Run, String> {
    let queue = format!("{queue}-library");
    drain(cli, url, &queue, target.drain_idle)?;
    let mut cmd = Command::new(drivers);
    cmd.args(["publish", url, &queue, &count.to_string()]);
    let meter = Meter::start(&[target.process]);
    let out = measure::output(cmd)?;
    let cost = meter.stop();
    let printed: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("id ").map(str::to_owned))
        .collect();
    landed_run(
        "library publish_batch",
        &printed,
        cli,
        target,
        url,
        &queue,
        count,
        cost,
    )
}

/// Drains `queue`, tallies what landed against the `printed` ids, prints the line of `who` and
/// gives the run.
#[allow(clippy::too_many_arguments)]
fn landed_run(
    who: &str,
    printed: &BTreeSet<String>,
    cli: &Path,
    target: &Target,
    url: &str,
    queue: &str,
    count: u64,
    cost: measure::Cost,
) -> Result<Run, String> {
    let landed = measure::tally(
        printed,
        drain(cli, url, queue, target.drain_idle)?
            .iter()
            .map(String::as_str),
    );
    let rate = count as f64 / cost.wall;
    println!(
        "  {who}: {rate:.0} msgs/s, {:.2} s, {} on the queue",
        cost.wall, landed.distinct
    );
    Ok(Run { rate, cost, landed })
}

/// The Python SDK publishing `count` envelopes one by one; the drain counts what landed (the
/// SDK prints no ids, so only the count is checked).
fn python_run(
    cli: &Path,
    python: &Path,
    target: &Target,
    url: &str,
    queue: &str,
    count: u64,
) -> Result<Run, String> {
    let queue = format!("{queue}-python");
    drain(cli, url, &queue, target.drain_idle)?;
    let mut cmd = Command::new(python);
    cmd.arg(root().join("xtask/bench/python_publish.py")).args([
        "publish",
        url,
        &queue,
        &count.to_string(),
    ]);
    let meter = Meter::start(&[target.process]);
    let out = measure::output(cmd)?;
    let cost = meter.stop();
    let figures = super::figures(&String::from_utf8_lossy(&out.stdout));
    let seconds = figures
        .iter()
        .find(|f| f.first().is_some_and(|k| k == "python_publish_s"))
        .map(|f| number(f, 1))
        .ok_or("the Python SDK printed no timing")?;
    let seen = drain(cli, url, &queue, target.drain_idle)?;
    let distinct: BTreeSet<&str> = seen.iter().map(String::as_str).collect();
    let landed = measure::Tally {
        deliveries: seen.len() as u64,
        distinct: distinct.len() as u64,
        duplicates: (seen.len() - distinct.len()) as u64,
        lost: count.saturating_sub(distinct.len() as u64),
        strangers: 0,
    };
    println!(
        "  python SDK: {:.0} msgs/s in its publish loop ({:.2} s; the process {:.2} s), {} on the queue",
        count as f64 / seconds,
        seconds,
        cost.wall,
        landed.distinct
    );
    Ok(Run {
        rate: count as f64 / seconds,
        cost,
        landed,
    })
}

/// Takes everything off `queue` with `babelqueue consume` (raw bodies, 8 handlers, until idle
/// for `idle` seconds) and returns each delivery's `meta.id`.
pub(crate) fn drain(cli: &Path, url: &str, queue: &str, idle: &str) -> Result<Vec<String>, String> {
    let mut cmd = Command::new(cli);
    cmd.args(["consume", "--queue", queue, "--output", "raw"])
        .args([
            "--concurrency",
            "8",
            "--prefetch",
            "256",
            "--idle-timeout",
            idle,
        ])
        .env("BABELQUEUE_URL", url);
    let child = measure::spawn(cmd)?;
    let (out, _) = measure::wait_capped(child, Duration::from_secs(300))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(raw_meta_id)
        .collect())
}

/// `meta.id` of an envelope line.
pub(crate) fn meta_id(line: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    v.get("meta")?.get("id")?.as_str().map(str::to_owned)
}

/// `meta.id` of the envelope in a `consume --output raw` line (`{"body": TEXT}`).
pub(crate) fn raw_meta_id(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    meta_id(v.get("body")?.as_str()?.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_read_from_envelopes_and_raw_lines() {
        let envelope = r#"{"job":"urn:a","meta":{"id":"m-1"},"attempts":0}"#;
        assert_eq!(meta_id(envelope.as_bytes()).as_deref(), Some("m-1"));
        let raw = serde_json::json!({ "body": envelope }).to_string();
        assert_eq!(raw_meta_id(&raw).as_deref(), Some("m-1"));
        assert_eq!(raw_meta_id(r#"{"body_base64":"AAE="}"#), None);
        assert_eq!(meta_id(b"not json"), None);
    }

    #[test]
    fn every_target_has_a_url_and_a_distinct_name() {
        let names: BTreeSet<&str> = TARGETS.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), TARGETS.len());
        assert!(TARGETS.iter().all(|t| t.url().contains("://")));
    }
}
