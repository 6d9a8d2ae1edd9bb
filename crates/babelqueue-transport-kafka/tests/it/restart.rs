//! Time to the first message after a worker restart, with messages waiting: how long a fresh
//! worker process (or a fresh consumer in the same process) takes to handle its first record
//! when the worker before it was SIGKILLed (it never left the group) or closed.
//!
//! It prints figures and asserts only a generous bound (20 s with the test session timeout
//! of 6 s). `BQ_KAFKA_RESTART_ROUNDS` (default 3) sets the number of restarts per setting;
//! `BQ_KAFKA_RESTART_DEFAULT_SESSION=1` adds the settings with librdkafka's default
//! `session.timeout.ms` (45 s), which take minutes. The figures in docs/transports/kafka.md
//! come from
//!
//! ```sh
//! BQ_KAFKA_RESTART_ROUNDS=10 BQ_KAFKA_RESTART_DEFAULT_SESSION=1 \
//!   cargo test -p babelqueue-transport-kafka --test it -- restart::time_to_first_message --nocapture
//! ```

use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, Transport};
use babelqueue_envelope::Envelope;
use babelqueue_transport_kafka::KafkaTransport;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{broker, create_topics, unique, url};

const URN: &str = "urn:babel:orders:created";
const CHILD_ENV: &str = "BQ_KAFKA_RESTART_CHILD";
/// The bound on one restart with the test session timeout (6 s): generous, not a target.
const BOUND: Duration = Duration::from_secs(20);

/// The worker process of `time_to_first_message` (the test binary re-executes itself with
/// this test selected); a no-op in a normal run. It prints `HANDLING <id>` for every record
/// and takes 20 ms per record, so records stay waiting for the next worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_child_worker() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (topic, url) = spec.split_once(' ').expect("`topic url`");
    let app = App::builder(KafkaTransport::connect(url).await.expect("a transport"))
        .queue(topic)
        .handle(URN, |ctx: Context| async move {
            use std::io::Write as _;
            println!("HANDLING {}", ctx.message_id().unwrap_or_default());
            std::io::stdout().flush().ok();
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<(), HandlerError>(())
        })
        .build()
        .unwrap();
    app.consume(Consume::new().handle_signals(false))
        .await
        .unwrap();
}

/// Starts a worker process on `topic` with `url`, waits for its first `HANDLING` line, SIGKILLs
/// it at once (it never leaves the group), and returns the time from the spawn to that line.
async fn spawn_until_first(topic: &str, url: &str, limit: Duration) -> Duration {
    let spawned = Instant::now();
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "restart::restart_child_worker",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, format!("{topic} {url}"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker process starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(limit, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("HANDLING ") {
                return spawned.elapsed();
            }
        }
        panic!("the worker exited before handling a record");
    })
    .await
    .unwrap_or_else(|_| panic!("no record handled within {limit:?} of the start"));
    child.kill().await.expect("SIGKILL");
    first
}

/// `url` with the worker settings `extra` and the group `group`.
fn setting_url(group: &str, extra: &str) -> String {
    let base = url();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}group_id={group}{extra}")
}

fn summary(times: &[Duration]) -> String {
    let mut ms: Vec<u128> = times.iter().map(Duration::as_millis).collect();
    ms.sort_unstable();
    let median = ms.get(ms.len() / 2).copied().unwrap_or_default();
    format!(
        "min {} ms, median {median} ms, max {} ms (n = {})",
        ms.first().copied().unwrap_or_default(),
        ms.last().copied().unwrap_or_default(),
        ms.len()
    )
}

async fn publish_waiting(topic: &str, count: usize) {
    let t = KafkaTransport::connect(&url()).await.unwrap();
    for n in 0..count {
        let body = Envelope::builder(URN)
            .queue(topic)
            .data(&json!({ "n": n }))
            .build()
            .unwrap()
            .encode()
            .unwrap();
        t.publish(topic, body.as_bytes()).await.unwrap();
    }
    t.close().await.unwrap();
}

/// SIGKILL loop: a cold start, then `rounds` restarts, each started right after the kill of the
/// worker before it, which had just handled its first record.
async fn kill_loop(name: &str, extra: &str, rounds: usize, limit: Duration) -> Vec<Duration> {
    let Some(config) = broker() else {
        return Vec::new();
    };
    let (topic, group) = (unique("restart"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    publish_waiting(&topic, 20 * (rounds + 1)).await;
    let url = setting_url(&group, extra);
    let cold = spawn_until_first(&topic, &url, limit).await;
    let mut restarts = Vec::new();
    for _ in 0..rounds {
        restarts.push(spawn_until_first(&topic, &url, limit).await);
    }
    println!(
        "RESTART {name}: cold start {} ms; restart after SIGKILL: {}",
        cold.as_millis(),
        summary(&restarts)
    );
    restarts
}

/// A fresh consumer in the same process after the one before it was closed (a graceful
/// restart): the time from the new transport's first poll to its first record.
async fn graceful_loop(name: &str, extra: &str, rounds: usize) -> Vec<Duration> {
    let Some(config) = broker() else {
        return Vec::new();
    };
    let (topic, group) = (unique("restart-graceful"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    publish_waiting(&topic, rounds + 1).await;
    let url = setting_url(&group, extra);
    let mut times = Vec::new();
    for _ in 0..=rounds {
        let t = KafkaTransport::connect(&url).await.unwrap();
        let started = Instant::now();
        let delivery = loop {
            if let Some(d) = t.pop(&topic, Duration::from_millis(100)).await.unwrap() {
                break d;
            }
            assert!(started.elapsed() < BOUND, "no record within {BOUND:?}");
        };
        times.push(started.elapsed());
        t.ack(&delivery).await.unwrap();
        t.close().await.unwrap();
    }
    let cold = times.remove(0);
    println!(
        "RESTART {name}: cold start {} ms; restart after a graceful close: {}",
        cold.as_millis(),
        summary(&times)
    );
    times
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_to_first_message() {
    if broker().is_none() {
        return;
    }
    let rounds: usize = std::env::var("BQ_KAFKA_RESTART_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let short = "&session.timeout.ms=6000&heartbeat.interval.ms=500";
    let instance = unique("worker");
    let static_short = format!("{short}&group_instance_id={instance}");
    let coop = "&partition.assignment.strategy=cooperative-sticky";

    for (name, extra) in [
        ("dynamic, session 6 s", short.to_owned()),
        (
            "dynamic, session 6 s, cooperative-sticky",
            format!("{short}{coop}"),
        ),
        ("static, session 6 s", static_short.clone()),
        (
            "static, session 6 s, cooperative-sticky",
            format!("{static_short}{coop}"),
        ),
    ] {
        for took in kill_loop(name, &extra, rounds, BOUND).await {
            assert!(took < BOUND, "{name}: {took:?}");
        }
    }
    for (name, extra) in [
        ("dynamic, session 6 s", short.to_owned()),
        (
            "static, session 6 s",
            format!("{short}&group_instance_id={}", unique("w")),
        ),
    ] {
        for took in graceful_loop(name, &extra, rounds).await {
            assert!(took < BOUND, "{name}: {took:?}");
        }
    }
    if std::env::var_os("BQ_KAFKA_RESTART_DEFAULT_SESSION").is_some() {
        let limit = Duration::from_secs(120);
        let static_default = format!("&group_instance_id={}", unique("worker"));
        let kip848 = "&group.protocol=consumer";
        for (name, extra) in [
            ("dynamic, default session (45 s)", String::new()),
            ("static, default session (45 s)", static_default),
            (
                "dynamic, group.protocol=consumer (KIP-848)",
                kip848.to_owned(),
            ),
        ] {
            kill_loop(name, &extra, rounds, limit).await;
        }
    }
}
