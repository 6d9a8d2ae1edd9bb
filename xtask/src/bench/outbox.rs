//! `cargo xtask bench outbox [--count N] [--broker NAME]... [--batches 100,500,1000,2000]`: how
//! fast the outbox relay moves PostgreSQL rows (`BQ_POSTGRES_URL`) to Redis, RabbitMQ and
//! Kafka, against the naive loop (select one row, publish, delete, one transaction per row).
//!
//! Each row of the table fills a fresh outbox table with N pending rows (untimed, default
//! 20 000), then times relay processes (`crates/babelqueue/benches/drivers.rs`) until the
//! table is drained: the naive loop, `OutboxRelay` at each batch size, and two relay processes
//! at once at the fastest batch size. Each relay prints a hash of every body the broker
//! accepted, so rows sent by both processes (or twice by one) are counted; afterwards the
//! table must hold no pending row and a drain of the queue (`babelqueue consume`) must find
//! each of the N messages. CPU: the relay processes' `cutime + cstime`, PostgreSQL's (every
//! backend) and the broker's sampled from `/proc/<pid>/stat`. The goal: at least 20 000 rows/s
//! to Redis; when it is not met the line says which process was busiest.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::cli::{TARGETS, Target, drain};
use super::measure::{self, Meter};
use super::verdict;

const DEFAULT_COUNT: u64 = 20_000;
const GOAL_REDIS: f64 = 20_000.0;
/// A relay that has not drained its table by then is stopped (by pid) and the row marked.
const CAP: Duration = Duration::from_secs(300);

/// One measured strategy.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) broker: String,
    pub(crate) strategy: String,
    pub(crate) processes: usize,
    pub(crate) rows: u64,
    pub(crate) rate: f64,
    pub(crate) cpu_per_1000: f64,
    pub(crate) relay_cores: f64,
    pub(crate) pg_cores: f64,
    pub(crate) broker_cores: f64,
    pub(crate) sent_twice: u64,
    pub(crate) pending_left: u64,
    pub(crate) landed: u64,
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut count = DEFAULT_COUNT;
    let mut batches: Vec<usize> = vec![100, 500, 1000, 2000];
    let mut wanted: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--count" => count = value()?.parse().map_err(|_| "--count: a number")?,
            "--broker" => wanted.push(value()?.clone()),
            "--batches" => {
                batches = measure::positive_list(value()?)
                    .ok_or("--batches: a list like 100,500,1000")?;
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    let targets: Vec<&Target> = TARGETS
        .iter()
        .filter(|t| t.name != "redis-laravel")
        .filter(|t| wanted.is_empty() || wanted.iter().any(|w| w == t.name))
        .collect();
    if targets.is_empty() {
        return Err("no broker: --broker takes redis, rabbitmq or kafka".into());
    }
    let cli = measure::build_cli()?;
    let driver = measure::build_drivers()?;
    let pg = std::env::var("BQ_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://bq:bq@127.0.0.1:5432/bq".to_owned());
    let mut rows = Vec::new();
    for target in targets {
        let url = target.url();
        let mut plan: Vec<(String, usize, Option<usize>)> = vec![("naive loop".into(), 1, None)];
        plan.extend(
            batches
                .iter()
                .map(|b| (format!("relay, batch {b}"), 1, Some(*b))),
        );
        let mut best: Option<(f64, usize)> = None;
        for (strategy, processes, batch) in plan {
            println!("== {}: {strategy}, {count} rows", target.name);
            let row = measure_row(
                &driver, &cli, &pg, target, &url, &strategy, processes, batch, count,
            )?;
            if let Some(b) = batch
                && best.is_none_or(|(rate, _)| row.rate > rate)
            {
                best = Some((row.rate, b));
            }
            rows.push(row);
        }
        if let Some((_, b)) = best {
            let strategy = format!("relay, batch {b}");
            println!(
                "== {}: {strategy}, two relay processes, {count} rows",
                target.name
            );
            rows.push(measure_row(
                &driver,
                &cli,
                &pg,
                target,
                &url,
                &strategy,
                2,
                Some(b),
                count,
            )?);
        }
    }
    println!();
    println!(
        "outbox relay, PostgreSQL to the broker, {count} rows per run, one run each (2 shared cores: noisy):"
    );
    println!("{}", render(&rows));
    println!("  {}", goal(&rows));
    Ok(())
}

fn driver_cmd(driver: &Path, words: &[&str]) -> Command {
    let mut cmd = Command::new(driver);
    cmd.args(words);
    cmd
}

#[allow(clippy::too_many_arguments)]
fn measure_row(
    driver: &Path,
    cli: &Path,
    pg: &str,
    target: &Target,
    url: &str,
    strategy: &str,
    processes: usize,
    batch: Option<usize>,
    count: u64,
) -> Result<Row, String> {
    let table = measure::unique("bq_bench_outbox").replace('-', "_");
    let queue = format!("bq-bench-outbox-{}", target.name);
    drain(cli, url, &queue, target.drain_idle)?;
    let n = count.to_string();
    measure::output(driver_cmd(driver, &["fill", pg, &table, &queue, &n]))?;
    let batch_text = batch.map(|b| b.to_string());
    let meter = Meter::start(&[measure::POSTGRES, target.process]);
    let mut children = Vec::new();
    for _ in 0..processes {
        let cmd = match &batch_text {
            Some(b) => driver_cmd(driver, &["relay", pg, &table, url, b]),
            None => driver_cmd(driver, &["naive", pg, &table, url]),
        };
        children.push(measure::spawn(cmd)?);
    }
    let waiters: Vec<_> = children
        .into_iter()
        .map(|c| std::thread::spawn(move || measure::wait_capped(c, CAP)))
        .collect();
    let mut sent: Vec<Vec<String>> = Vec::new();
    let mut failure = None;
    for waiter in waiters {
        let (out, by_itself) = waiter.join().map_err(|_| "a waiting thread panicked")??;
        if !by_itself || !out.status.success() {
            failure.get_or_insert(format!(
                "a relay {}: {}",
                if by_itself {
                    "failed"
                } else {
                    "was stopped at the cap"
                },
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        sent.push(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.strip_prefix("sent ").map(str::to_owned))
                .collect(),
        );
    }
    let cost = meter.stop();
    let left = measure::output(driver_cmd(driver, &["count", pg, &table]))?;
    let _ = measure::output(driver_cmd(driver, &["drop", pg, &table]));
    let landed = drain(cli, url, &queue, target.drain_idle)?;
    if let Some(e) = failure {
        return Err(e);
    }
    let pending_left = String::from_utf8_lossy(&left.stdout)
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    let landed: BTreeSet<String> = landed.into_iter().collect();
    let row = Row {
        broker: target.name.to_owned(),
        strategy: strategy.to_owned(),
        processes,
        rows: count,
        rate: count as f64 / cost.wall,
        cpu_per_1000: cost.cpu_per_1000(count),
        relay_cores: cost.cpu / cost.wall,
        pg_cores: cost.broker_cores(0),
        broker_cores: cost.broker_cores(1),
        sent_twice: sent_twice(&sent),
        pending_left,
        landed: landed.len() as u64,
    };
    println!(
        "  {:.0} rows/s, {} sent twice, {} pending left, {} distinct on the queue",
        row.rate, row.sent_twice, row.pending_left, row.landed
    );
    Ok(row)
}

/// Bodies the broker accepted more than once, over every relay process's list.
pub(crate) fn sent_twice(per_process: &[Vec<String>]) -> u64 {
    let mut seen = BTreeSet::new();
    let mut twice = 0;
    for hash in per_process.iter().flatten() {
        if !seen.insert(hash.as_str()) {
            twice += 1;
        }
    }
    twice
}

pub(crate) fn render(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.broker.clone(),
                r.strategy.clone(),
                r.processes.to_string(),
                format!("{:.0}", r.rate),
                format!("{:.3}", r.cpu_per_1000),
                format!("{:.2}", r.relay_cores),
                format!("{:.2}", r.pg_cores),
                format!("{:.2}", r.broker_cores),
                r.sent_twice.to_string(),
                r.pending_left.to_string(),
                format!("{}/{}", r.landed, r.rows),
            ]
        })
        .collect();
    measure::table(
        &[
            "broker",
            "strategy",
            "relays",
            "rows/s",
            "CPU-s/1000",
            "relay cores",
            "postgres cores",
            "broker cores",
            "sent twice",
            "pending",
            "on queue",
        ],
        &cells,
    )
}

/// The Redis goal: met or not, and what was busiest at the fastest row.
pub(crate) fn goal(rows: &[Row]) -> String {
    let Some(best) = rows
        .iter()
        .filter(|r| r.broker == "redis" && r.strategy != "naive loop")
        .max_by(|a, b| a.rate.total_cmp(&b.rate))
    else {
        return "goal: at least 20 000 rows/s to Redis: not measured".to_owned();
    };
    let mut text = format!(
        "goal: at least {GOAL_REDIS:.0} rows/s to Redis: {:.0} ({}, {} relay(s)), {}",
        best.rate,
        best.strategy,
        best.processes,
        verdict(best.rate >= GOAL_REDIS)
    );
    if best.rate < GOAL_REDIS {
        let busiest = [
            ("the relay process(es)", best.relay_cores),
            ("PostgreSQL", best.pg_cores),
            ("Redis", best.broker_cores),
        ]
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or(("nothing", 0.0));
        text.push_str(&format!(
            "; busiest: {} at {:.2} cores (relay {:.2} + PostgreSQL {:.2} + Redis {:.2} of the machine's 2)",
            busiest.0, busiest.1, best.relay_cores, best.pg_cores, best.broker_cores
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(strategy: &str, rate: f64) -> Row {
        Row {
            broker: "redis".into(),
            strategy: strategy.into(),
            processes: 1,
            rows: 100,
            rate,
            cpu_per_1000: 0.1,
            relay_cores: 0.6,
            pg_cores: 0.9,
            broker_cores: 0.2,
            sent_twice: 0,
            pending_left: 0,
            landed: 100,
        }
    }

    #[test]
    fn rows_sent_by_both_processes_or_twice_by_one_are_counted() {
        let a = vec!["h1".to_owned(), "h2".to_owned(), "h2".to_owned()];
        let b = vec!["h3".to_owned(), "h1".to_owned()];
        assert_eq!(sent_twice(&[a.clone(), b]), 2);
        assert_eq!(sent_twice(&[vec!["x".into()], vec!["y".into()]]), 0);
        assert_eq!(sent_twice(&[a]), 1);
    }

    #[test]
    fn the_goal_names_the_busiest_process_when_missed() {
        let missed = goal(&[
            row("naive loop", 50_000.0),
            row("relay, batch 500", 12_000.0),
        ]);
        assert!(missed.contains("12000 (relay, batch 500"), "{missed}");
        assert!(
            missed.contains("NOT met") && missed.contains("busiest: PostgreSQL at 0.90"),
            "{missed}"
        );
        let met = goal(&[row("relay, batch 1000", 25_000.0)]);
        assert!(met.ends_with(", met"), "{met}");
        assert!(goal(&[]).ends_with("not measured"));
    }

    #[test]
    fn the_table_has_one_line_per_row_and_the_landed_fraction() {
        let text = render(&[row("naive loop", 900.0), row("relay, batch 500", 12_000.0)]);
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().nth(2).unwrap().ends_with("100/100"), "{text}");
    }
}
