//! `cargo xtask bench scale [--count N] [--broker NAME]... [--processes 1,2,4] [--cap SECONDS]`:
//! one queue, K worker processes (`babelqueue consume`, one handler each, 64 prefetched),
//! on the local Redis (both layouts), RabbitMQ, Kafka (a topic of 8 partitions, one consumer
//! group) and NATS JetStream.
//!
//! Each row pre-fills the queue with N messages (`babelqueue publish --count N`, default
//! 20 000; their printed ids are the expected set), starts K processes at once, and waits
//! until every process has been idle for the broker's idle timeout (or the row's cap, default
//! 120 s, after which the processes are stopped by pid and the row is marked capped). The
//! rate is N over the time to the last delivery (the wall clock less the idle timeout). Every
//! delivery's `meta.id` is counted: duplicates (ids delivered more than once) and lost (ids
//! never delivered). On Kafka each line carries its partition and offset: the order column
//! counts deliveries that came after a later offset of the same partition in one process.
//! The CPU is the workers' (`cutime + cstime`); the broker's comes from `/proc/<pid>/stat` of
//! its process and is shared with whatever else used it meanwhile. Opt-in: never in CI.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::cli::{drain, meta_id, raw_meta_id};
use super::measure::{self, BrokerProcess, Meter, Tally};
use super::python;
use crate::root;

const DEFAULT_COUNT: u64 = 20_000;
const DEFAULT_CAP: u64 = 120;
const KAFKA_PARTITIONS: u32 = 8;

/// A broker of the scaling benchmark.
struct Broker {
    name: &'static str,
    env: &'static str,
    default_url: &'static str,
    suffix: &'static str,
    process: BrokerProcess,
    /// Seconds of quiet before a worker exits: Kafka's includes the consumer group's join (the
    /// broker waits 3 s for more members before the first assignment).
    idle: u64,
    kafka: bool,
}

const BROKERS: &[Broker] = &[
    Broker {
        name: "redis",
        env: "BQ_REDIS_URL",
        default_url: "redis://127.0.0.1:6379",
        suffix: "",
        process: measure::REDIS,
        idle: 2,
        kafka: false,
    },
    Broker {
        name: "redis-laravel",
        env: "BQ_REDIS_URL",
        default_url: "redis://127.0.0.1:6379",
        suffix: "?laravel=1",
        process: measure::REDIS,
        idle: 2,
        kafka: false,
    },
    Broker {
        name: "rabbitmq",
        env: "BQ_AMQP_URL",
        default_url: "amqp://guest:guest@127.0.0.1:5672/%2f",
        suffix: "",
        process: measure::RABBITMQ,
        idle: 2,
        kafka: false,
    },
    Broker {
        name: "kafka",
        env: "BQ_KAFKA_URL",
        default_url: "kafka://127.0.0.1:9092",
        suffix: "",
        process: measure::KAFKA,
        idle: 10,
        kafka: true,
    },
    Broker {
        name: "nats",
        env: "BQ_NATS_URL",
        default_url: "nats://127.0.0.1:4222",
        suffix: "",
        process: measure::NATS,
        idle: 2,
        kafka: false,
    },
];

/// One row of the table.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) broker: String,
    pub(crate) processes: u32,
    pub(crate) rate: f64,
    pub(crate) cpu_per_1000: f64,
    pub(crate) worker_cores: f64,
    pub(crate) broker_cores: f64,
    pub(crate) tally: Tally,
    /// Out-of-order deliveries where the broker promises order (`None`: it does not).
    pub(crate) order_breaks: Option<u64>,
    pub(crate) capped: bool,
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let (mut count, mut cap) = (DEFAULT_COUNT, DEFAULT_CAP);
    let mut processes = vec![1, 2, 4];
    let mut wanted: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--count" => count = value()?.parse().map_err(|_| "--count: a number")?,
            "--cap" => cap = value()?.parse().map_err(|_| "--cap: seconds")?,
            "--broker" => wanted.push(value()?.clone()),
            "--processes" => {
                processes =
                    measure::positive_list(value()?).ok_or("--processes: a list like 1,2,4")?;
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if let Some(bad) = wanted
        .iter()
        .find(|w| !BROKERS.iter().any(|b| b.name == *w))
    {
        return Err(format!("unknown broker {bad:?}"));
    }
    let cli = measure::build_cli()?;
    let mut rows = Vec::new();
    for broker in BROKERS
        .iter()
        .filter(|b| wanted.is_empty() || wanted.iter().any(|w| w == b.name))
    {
        for &k in &processes {
            println!(
                "== {}: {k} worker process(es), {count} messages",
                broker.name
            );
            match row(&cli, broker, k, count, Duration::from_secs(cap)) {
                Ok(row) => rows.push(row),
                Err(e) => println!("  {}: {k} process(es) failed: {e}", broker.name),
            }
        }
    }
    println!();
    println!(
        "one queue, K `babelqueue consume` processes (one handler each, prefetch 64), {count} messages per row, one run each (2 shared cores: noisy):"
    );
    println!("{}", render(&rows));
    for line in bounds(&rows) {
        println!("  {line}");
    }
    Ok(())
}

fn url(broker: &Broker, group: &str) -> String {
    let base = std::env::var(broker.env).unwrap_or_else(|_| broker.default_url.to_owned());
    if broker.kafka {
        let joiner = if base.contains('?') { '&' } else { '?' };
        format!("{base}{joiner}group_id={group}")
    } else {
        format!("{base}{}", broker.suffix)
    }
}

/// `kafka://host:port…` as librdkafka's `bootstrap.servers`.
fn bootstrap(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest).to_owned()
}

fn kafka_admin(what: &str, url: &str, topic: &str, partitions: Option<u32>) -> Result<(), String> {
    let mut cmd = Command::new(python());
    cmd.arg(root().join("xtask/bench/python_publish.py"))
        .args([what, &bootstrap(url), topic]);
    if let Some(p) = partitions {
        cmd.arg(p.to_string());
    }
    measure::output(cmd).map(|_| ())
}

fn row(cli: &Path, broker: &Broker, k: u32, count: u64, cap: Duration) -> Result<Row, String> {
    let group = measure::unique("bq-bench-scale");
    let url = url(broker, &group);
    let queue = if broker.kafka {
        let topic = measure::unique("bq-bench-scale-kafka");
        kafka_admin("topic", &url, &topic, Some(KAFKA_PARTITIONS))?;
        topic
    } else {
        let queue = format!("bq-bench-scale-{}", broker.name);
        drain(cli, &url, &queue, &broker.idle.to_string())?;
        queue
    };
    let result = measure_row(cli, broker, &url, &queue, k, count, cap);
    if broker.kafka {
        let _ = kafka_admin("delete-topic", &url, &queue, None);
    }
    result
}

fn measure_row(
    cli: &Path,
    broker: &Broker,
    url: &str,
    queue: &str,
    k: u32,
    count: u64,
    cap: Duration,
) -> Result<Row, String> {
    let mut publish = Command::new(cli);
    publish
        .args([
            "publish",
            "--queue",
            queue,
            "--urn",
            "urn:babel:bench:scale",
        ])
        .args(["--count", &count.to_string()])
        .env("BABELQUEUE_URL", url);
    let prefill = Meter::start(&[]);
    let out = measure::output(publish)?;
    let expected: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| meta_id(l.as_bytes()))
        .collect();
    println!(
        "  pre-filled {} in {:.2} s",
        expected.len(),
        prefill.stop().wall
    );
    let output = if broker.kafka { "wire" } else { "raw" };
    let idle = broker.idle.to_string();
    let meter = Meter::start(&[broker.process]);
    let mut children = Vec::new();
    for _ in 0..k {
        let mut consume = Command::new(cli);
        consume
            .args(["consume", "--queue", queue, "--output", output])
            .args([
                "--concurrency",
                "1",
                "--prefetch",
                "64",
                "--idle-timeout",
                &idle,
            ])
            .env("BABELQUEUE_URL", url);
        children.push(measure::spawn(consume)?);
    }
    let waiters: Vec<_> = children
        .into_iter()
        .map(|child| std::thread::spawn(move || measure::wait_capped(child, cap)))
        .collect();
    let mut outputs = Vec::new();
    let mut capped = false;
    for waiter in waiters {
        let (out, by_itself) = waiter
            .join()
            .map_err(|_| "a waiting thread panicked".to_owned())??;
        capped |= !by_itself;
        outputs.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let cost = meter.stop();
    let busy = if capped {
        cost.wall
    } else {
        (cost.wall - broker.idle as f64).max(0.001)
    };
    let mut ids = Vec::new();
    let mut positions = Vec::new();
    for (process, text) in outputs.iter().enumerate() {
        for line in text.lines() {
            let (id, position) = if broker.kafka {
                wire_line(line)
            } else {
                (raw_meta_id(line), None)
            };
            ids.extend(id);
            if let Some((partition, offset)) = position {
                positions.push((process, partition, offset));
            }
        }
    }
    let tally = measure::tally(&expected, ids.iter().map(String::as_str));
    let row = Row {
        broker: broker.name.to_owned(),
        processes: k,
        rate: tally.distinct as f64 / busy,
        cpu_per_1000: cost.cpu_per_1000(tally.deliveries),
        worker_cores: cost.cpu / busy,
        broker_cores: cost.brokers.first().copied().unwrap_or(0.0) / busy,
        tally,
        order_breaks: broker.kafka.then(|| order_breaks(&positions)),
        capped,
    };
    println!(
        "  drained {} of {} in {busy:.2} s: {:.0} msgs/s, {} duplicate(s), {} lost",
        tally.distinct,
        expected.len(),
        row.rate,
        tally.duplicates,
        tally.lost
    );
    Ok(row)
}

/// The `meta.id` and (partition, offset) of a `consume --output wire` line on Kafka (its
/// broker id is `topic/partition@offset`).
fn wire_line(line: &str) -> (Option<String>, Option<(i64, i64)>) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return (None, None);
    };
    let id = v
        .get("body")
        .and_then(|b| b.as_str())
        .and_then(|b| meta_id(b.as_bytes()));
    let position = v
        .pointer("/broker/id")
        .and_then(|i| i.as_str())
        .and_then(|i| i.rsplit_once('/'))
        .and_then(|(_, at)| at.split_once('@'))
        .and_then(|(p, o)| Some((p.parse().ok()?, o.parse().ok()?)));
    (id, position)
}

/// Deliveries that came, in one process's output, after a later offset of the same partition.
pub(crate) fn order_breaks(positions: &[(usize, i64, i64)]) -> u64 {
    let mut last: BTreeMap<(usize, i64), i64> = BTreeMap::new();
    let mut breaks = 0;
    for &(process, partition, offset) in positions {
        let seen = last.entry((process, partition)).or_insert(i64::MIN);
        if offset <= *seen {
            breaks += 1;
        } else {
            *seen = offset;
        }
    }
    breaks
}

/// The table: broker, processes, msgs/s, speed-up against the broker's one-process row, CPU,
/// duplicates, lost, order.
pub(crate) fn render(rows: &[Row]) -> String {
    let one: BTreeMap<&str, f64> = rows
        .iter()
        .filter(|r| r.processes == 1)
        .map(|r| (r.broker.as_str(), r.rate))
        .collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.broker.clone(),
                r.processes.to_string(),
                format!("{:.0}{}", r.rate, if r.capped { " (capped)" } else { "" }),
                one.get(r.broker.as_str())
                    .map_or("-".to_owned(), |base| format!("{:.2}x", r.rate / base)),
                format!("{:.3}", r.cpu_per_1000),
                format!("{:.2}", r.worker_cores),
                format!("{:.2}", r.broker_cores),
                r.tally.duplicates.to_string(),
                r.tally.lost.to_string(),
                r.order_breaks.map_or("-".to_owned(), |b| {
                    if b == 0 {
                        "kept".to_owned()
                    } else {
                        format!("{b} broken")
                    }
                }),
            ]
        })
        .collect();
    measure::table(
        &[
            "broker",
            "processes",
            "msgs/s",
            "speed-up vs 1",
            "CPU-s/1000",
            "worker cores",
            "broker cores",
            "duplicates",
            "lost",
            "order",
        ],
        &cells,
    )
}

/// Cores of this machine the workers and the broker share.
const MACHINE_CORES: f64 = 2.0;

/// Where each broker's rows stop scaling, and what was busy then: the broker's process (near
/// one core: it is single-threaded, as Redis is, or its scheduler threads are), or the machine
/// (workers and broker together near every core).
pub(crate) fn bounds(rows: &[Row]) -> Vec<String> {
    let mut by_broker: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by_broker.entry(r.broker.as_str()).or_default().push(r);
    }
    by_broker
        .into_iter()
        .map(|(name, mut rows)| {
            rows.sort_by_key(|r| r.processes);
            let stalled = rows
                .windows(2)
                .find(|w| w[1].rate < w[0].rate * 1.15)
                .map(|w| w[1]);
            let top = rows.iter().copied().max_by(|a, b| a.rate.total_cmp(&b.rate));
            match (stalled, top) {
                (Some(at), _) => {
                    let total = at.worker_cores + at.broker_cores;
                    let why = if total >= MACHINE_CORES * 0.85 {
                        format!(
                            "the machine: workers {:.2} + broker {:.2} of {MACHINE_CORES:.0} cores",
                            at.worker_cores, at.broker_cores
                        )
                    } else if at.broker_cores >= 0.8 {
                        format!("the broker process: {:.2} cores", at.broker_cores)
                    } else {
                        format!(
                            "neither CPU (workers {:.2}, broker {:.2} cores): round trips or the broker's own pacing",
                            at.worker_cores, at.broker_cores
                        )
                    };
                    format!(
                        "{name}: stops scaling at {} processes ({:.0} msgs/s); bound by {why}",
                        at.processes, at.rate
                    )
                }
                (None, Some(top)) => format!(
                    "{name}: still scaling at {} processes ({:.0} msgs/s; workers {:.2}, broker {:.2} cores)",
                    top.processes, top.rate, top.worker_cores, top.broker_cores
                ),
                (None, None) => format!("{name}: no rows"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(broker: &str, processes: u32, rate: f64, worker: f64, broker_cores: f64) -> Row {
        Row {
            broker: broker.to_owned(),
            processes,
            rate,
            cpu_per_1000: 0.05,
            worker_cores: worker,
            broker_cores,
            tally: Tally::default(),
            order_breaks: None,
            capped: false,
        }
    }

    #[test]
    fn order_breaks_count_per_process_and_partition() {
        // Process 0 reads partition 1 in order and partition 2 with one step back; process 1
        // re-reads partition 1 from the start after a rebalance, which is not an order break.
        let positions = [
            (0, 1, 0),
            (0, 2, 5),
            (0, 1, 1),
            (0, 2, 4),
            (1, 1, 0),
            (1, 1, 1),
        ];
        assert_eq!(order_breaks(&positions), 1);
        assert_eq!(order_breaks(&[]), 0);
        assert_eq!(
            order_breaks(&[(0, 0, 3), (0, 0, 3)]),
            1,
            "a repeat is a break"
        );
    }

    #[test]
    fn wire_lines_give_the_id_and_the_partition_offset() {
        let line = serde_json::json!({
            "queue": "t",
            "body": r#"{"job":"urn:a","meta":{"id":"m-7"}}"#,
            "broker": {"id": "bq/top-ic/3@1042", "redelivered": null, "properties": {}},
        })
        .to_string();
        assert_eq!(wire_line(&line), (Some("m-7".to_owned()), Some((3, 1042))));
        assert_eq!(wire_line("{}"), (None, None));
    }

    #[test]
    fn the_table_shows_speed_up_against_one_process_and_the_order_verdict() {
        let mut rows = vec![
            row("redis", 1, 1000.0, 0.5, 0.3),
            row("redis", 2, 1800.0, 1.0, 0.5),
        ];
        rows[1].tally.duplicates = 3;
        rows[1].order_breaks = Some(0);
        let text = render(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("speed-up vs 1"));
        assert!(lines[1].contains("1.00x") && lines[1].trim_end().ends_with('-'));
        assert!(
            lines[2].contains("1.80x") && lines[2].contains("kept"),
            "{text}"
        );
        assert!(lines[2].split_whitespace().any(|c| c == "3"), "{text}");
    }

    #[test]
    fn bounds_name_the_broker_the_machine_or_neither() {
        let rows = vec![
            row("redis", 1, 1000.0, 0.4, 0.5),
            row("redis", 2, 1900.0, 0.8, 0.9),
            row("redis", 4, 2000.0, 0.5, 0.95),
            row("kafka", 1, 1000.0, 0.9, 0.5),
            row("kafka", 2, 1050.0, 1.2, 0.6),
            row("nats", 1, 500.0, 0.2, 0.1),
            row("nats", 2, 520.0, 0.3, 0.1),
            row("pg", 1, 500.0, 0.2, 0.1),
            row("pg", 2, 900.0, 0.3, 0.1),
        ];
        let lines = bounds(&rows);
        let find = |name: &str| lines.iter().find(|l| l.starts_with(name)).unwrap().clone();
        assert!(
            find("redis").contains("at 4 processes")
                && find("redis").contains("the broker process")
        );
        assert!(find("kafka").contains("the machine"), "{lines:?}");
        assert!(find("nats").contains("neither CPU"), "{lines:?}");
        assert!(find("pg").contains("still scaling at 2"), "{lines:?}");
    }
}
