//! A worker that keeps running while the broker is SIGKILLed and started again under it: it
//! must go on by itself once the broker is back, losing nothing.
//!
//! This test takes the shared broker down, so it is not part of the `it` binary (whose other
//! tests run at the same time and need the broker): it is the `broker_restart` test target,
//! which cargo runs on its own. It brings the broker back up even when it fails (a drop
//! guard). It takes about 40 s, most of it the broker's start (`scripts/brokers.sh up kafka`).
//!
//! ```sh
//! cargo test -p babelqueue-transport-kafka --test broker_restart -- --nocapture
//! ```

use std::collections::HashSet;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, Transport};
use babelqueue_envelope::Envelope;
use babelqueue_transport_kafka::KafkaTransport;
use serde_json::{Value, json};

use crate::common::{broker, brokers, committed, create_topics, eventually, unique, url};

const URN: &str = "urn:babel:orders:created";
/// How long the broker may take to stop and to start again (`scripts/brokers.sh`).
const BROKER_LIMIT: Duration = Duration::from_secs(240);
/// How long the worker may take, once the broker is back, to handle every record: a group
/// rejoin and a few fetches (a few seconds with the 2 s session timeout), with a wide margin.
const RECOVERY_LIMIT: Duration = Duration::from_secs(30);
/// Records published before the kill (a backlog the worker is still working through when the
/// broker dies) and after the restart.
const BEFORE: i64 = 40;
const AFTER: i64 = 20;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `scripts/brokers.sh ARGS…`, bounded by [`BROKER_LIMIT`]; whether it succeeded.
fn brokers_sh(args: &[&str]) -> bool {
    let mut child = match Command::new(workspace().join("scripts/brokers.sh"))
        .args(args)
        .current_dir(workspace())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("scripts/brokers.sh {args:?} did not start: {e}");
            return false;
        }
    };
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if started.elapsed() < BROKER_LIMIT => {
                std::thread::sleep(Duration::from_millis(200));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("scripts/brokers.sh {args:?} did not finish within {BROKER_LIMIT:?}");
                return false;
            }
        }
    }
}

/// The broker JVM's pid, from the pid file `scripts/brokers.d/40-kafka.sh` writes.
fn broker_pid() -> Option<String> {
    let dir = std::env::var_os("BQ_BROKERS_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("BQ_CACHE").map(|c| PathBuf::from(c).join("brokers")))
        .unwrap_or_else(|| workspace().join("../cache/brokers"));
    let pid = std::fs::read_to_string(dir.join("kafka/kafka.pid")).ok()?;
    let pid = pid.trim();
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then(|| pid.to_owned())
}

/// Whether the broker's listener accepts a connection.
fn listening() -> bool {
    brokers().split(',').any(|b| {
        b.to_socket_addrs()
            .ok()
            .into_iter()
            .flatten()
            .any(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok())
    })
}

/// The broker taken down by the test. Dropped (the test ends, passing or failing) without a
/// successful [`BrokerDown::restart`], or with the broker not listening, it starts the broker
/// again, so the test never leaves it down.
struct BrokerDown {
    restarted: bool,
}

impl BrokerDown {
    /// SIGKILLs the broker JVM (a crash: no controlled shutdown, no group leave) and waits until
    /// it is gone, or stops it with `scripts/brokers.sh down kafka` when its pid is unknown.
    fn kill() -> BrokerDown {
        let guard = BrokerDown { restarted: false };
        let Some(pid) = broker_pid() else {
            assert!(brokers_sh(&["down", "kafka"]), "the broker stops");
            return guard;
        };
        let killed = Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(killed, "SIGKILL of the broker (pid {pid}) failed");
        // A zombie is not gone: the JVM's main thread shows `Z` while its other threads still
        // exit and its port still accepts, and `up` would take the dying broker for a running
        // one. The broker is a daemon (init reaps it): wait until its pid disappears.
        let proc = PathBuf::from(format!("/proc/{pid}"));
        let killed_at = Instant::now();
        while proc.exists() {
            assert!(
                killed_at.elapsed() < BROKER_LIMIT,
                "the broker (pid {pid}) outlives its SIGKILL"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        guard
    }

    /// Starts the broker again and waits until it is ready.
    fn restart(&mut self) {
        assert!(brokers_sh(&["up", "kafka"]), "the broker starts again");
        assert!(listening(), "the broker listens again");
        self.restarted = true;
    }
}

impl Drop for BrokerDown {
    fn drop(&mut self) {
        if !self.restarted || !listening() {
            eprintln!("bringing the broker back up after a failure");
            brokers_sh(&["up", "kafka"]);
        }
    }
}

fn body(n: i64, topic: &str) -> Vec<u8> {
    Envelope::builder(URN)
        .queue(topic)
        .data(&json!({ "n": n }))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

async fn publish(topic: &str, numbers: std::ops::Range<i64>) {
    let t = KafkaTransport::connect(&url()).await.unwrap();
    for n in numbers {
        t.publish(topic, &body(n, topic)).await.unwrap();
    }
    t.close().await.unwrap();
}

/// The broker is SIGKILLed under a concurrency-8 worker in the middle of a backlog (records in
/// flight, some acknowledged while the broker is gone), started again, and more records are
/// published: every record is handled within [`RECOVERY_LIMIT`] of the broker being back, and
/// the committed position reaches the end.
///
/// Before the fix the worker stayed wedged for minutes: librdkafka queues an error event on the
/// consumer queue for every failed reconnection while the broker is down, ahead of the
/// rebalance and the records that follow, and `pop` took one of them per poll timeout (1 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_goes_on_by_itself_after_the_broker_is_killed_and_restarted() {
    let Some(config) = broker() else { return };
    let (topic, group) = (unique("broker-restart"), unique("group"));
    create_topics(&config, &[&topic], 1).await;
    publish(&topic, 0..BEFORE).await;

    let base = url();
    let sep = if base.contains('?') { '&' } else { '?' };
    // As in the chaos suite: a 2 s session. librdkafka retries the refused connections at
    // least every 100 ms here (instead of backing off up to 10 s): every round in which all
    // brokers are down queues an error event (librdkafka re-bootstraps and counts again), so
    // an outage queues hundreds of them, as it did in the chaos run that found the bug.
    let worker_url = format!(
        "{base}{sep}group_id={group}&session.timeout.ms=2000&heartbeat.interval.ms=500\
         &reconnect.backoff.ms=50&reconnect.backoff.max.ms=100"
    );
    let seen: Arc<Mutex<HashSet<i64>>> = Arc::default();
    let calls = seen.clone();
    let app = App::builder(KafkaTransport::connect(&worker_url).await.unwrap())
        .queue(topic.clone())
        .concurrency(8)
        .max_attempts(1)
        .handle(URN, move |ctx: Context| {
            let calls = calls.clone();
            async move {
                let data: Value = ctx.data_as()?;
                tokio::time::sleep(Duration::from_millis(100)).await;
                calls
                    .lock()
                    .unwrap()
                    .insert(data["n"].as_i64().unwrap_or(-1));
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.consume(Consume::new().handle_signals(false)).await }
    });
    let handled = || seen.lock().unwrap().len();
    assert!(
        eventually(Duration::from_secs(60), || handled() >= 8).await,
        "the worker starts handling records"
    );

    let mut down = tokio::task::block_in_place(BrokerDown::kill);
    let killed = Instant::now();
    let at_kill = handled();
    tokio::task::block_in_place(|| down.restart());
    let back = Instant::now();
    println!(
        "broker down for {:?}; {at_kill} of {BEFORE} records handled at the kill",
        back - killed
    );
    publish(&topic, BEFORE..BEFORE + AFTER).await;

    let all = usize::try_from(BEFORE + AFTER).unwrap();
    let recovered = eventually(RECOVERY_LIMIT, || handled() == all).await;
    let took = back.elapsed();
    app.stop_handle().stop();
    running.await.unwrap().unwrap();
    let missing: Vec<i64> = (0..BEFORE + AFTER)
        .filter(|n| !seen.lock().unwrap().contains(n))
        .collect();
    assert!(
        recovered,
        "the worker is wedged: {} records not handled {took:?} after the broker came back: \
         {missing:?}",
        missing.len()
    );
    println!("every record handled {took:?} after the broker came back");
    let end = Some(BEFORE + AFTER);
    assert!(
        eventually(Duration::from_secs(10), || committed(&group, &topic) == end).await,
        "the committed position reaches the end: {:?}",
        committed(&group, &topic)
    );
}
