//! Two worker processes share the consumer group on the cluster; one is SIGKILLed mid-stream
//! (it never leaves the group). The other takes its partitions once the session timeout (6 s
//! here) drops it: nothing lost, nothing left uncommitted, the duplicates and the rebalance
//! time printed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use babelqueue_core::{App, Consume, Context, HandlerError};
use babelqueue_testkit::unique_queue;
use babelqueue_transport_kafka::KafkaTransport;
use serde_json::Value;

use crate::cluster::Cluster;
use crate::failover::replicated_topic;
use crate::workload::{
    Handled, PATIENCE, URN, eventually, ms, partitions_of, publish_all, seq_of, tally,
};
use crate::{Restore, serial};

const CHILD_ENV: &str = "BQ_KAFKA_HA_CHILD";
const MESSAGES: u64 = 2_000;
const SESSION: &str = "session.timeout.ms=6000&heartbeat.interval.ms=500";

/// The worker process (the test binary runs itself with this test selected); a no-op in a
/// normal run. Each call takes 10 ms and appends `<seq> <unix ms>` (or `corrupt <unix ms>`) to
/// its log file in one write: a file, not standard output, where the test harness's own lines
/// ("has been running for over 60 seconds") could split a line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_child_worker() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.splitn(3, ' ');
    let (Some(log), Some(topic), Some(url)) = (parts.next(), parts.next(), parts.next()) else {
        panic!("`log topic url`, got {spec:?}");
    };
    let log = Arc::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("the log file"),
    );
    let app = App::builder(KafkaTransport::connect(url).await.expect("a transport"))
        .queue(topic)
        .handle(URN, move |ctx: Context| {
            let log = log.clone();
            async move {
                use std::io::Write as _;
                tokio::time::sleep(Duration::from_millis(10)).await;
                let seq = ctx.data_as::<Value>().ok().and_then(|d| seq_of(&d));
                let seq = seq.map_or("corrupt".to_owned(), |s| s.to_string());
                let line = format!("{seq} {}\n", unix_ms(SystemTime::now()));
                (&*log).write_all(line.as_bytes()).expect("the log line");
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    // SIGTERM: finish, commit, leave the group.
    app.consume(Consume::new()).await.unwrap();
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The calls the workers logged so far, (worker, call), their times on this process's clock.
#[derive(Debug)]
struct Logs {
    files: Vec<PathBuf>,
    /// The same moment on both clocks.
    epoch: (Instant, u64),
}

impl Logs {
    fn new(topic: &str) -> Logs {
        let dir = std::env::temp_dir();
        Logs {
            files: (0..2)
                .map(|n| dir.join(format!("{topic}-worker-{n}.log")))
                .collect(),
            epoch: (Instant::now(), unix_ms(SystemTime::now())),
        }
    }

    fn calls(&self) -> Vec<(usize, Handled)> {
        let mut calls = Vec::new();
        for (n, file) in self.files.iter().enumerate() {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            // a line still being written has no newline yet
            for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
                let (seq, at) = line.trim().split_once(' ').expect("`seq ms`");
                let at: u64 = at.parse().expect("unix ms");
                let at = self.epoch.0 + Duration::from_millis(at.saturating_sub(self.epoch.1));
                calls.push((
                    n,
                    Handled {
                        seq: seq.parse().ok(),
                        at,
                    },
                ));
            }
        }
        calls
    }
}

impl Drop for Logs {
    fn drop(&mut self) {
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Starts worker process `n`, logging to its file of `logs`.
fn spawn_worker(n: usize, topic: &str, url: &str, logs: &Logs) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "workers::ha_child_worker",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(
            CHILD_ENV,
            format!("{} {topic} {url}", logs.files[n].display()),
        )
        .env_remove("BQ_REQUIRE_HA")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker process starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_killed_while_another_shares_the_group_loses_nothing() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let _serial = serial().await;
    let Some(cluster) = Cluster::from_env().await else {
        return;
    };
    let _restore = Restore(cluster.clone());
    let (topic, group) = (unique_queue("ha-two-workers"), unique_queue("ha-group"));
    replicated_topic(&cluster, &topic, 8, "").await;
    let published = publish_all(&cluster.url, &topic, 0..MESSAGES, 8, Duration::ZERO).await;
    let confirmed: BTreeSet<u64> = published.confirmed.keys().copied().collect();

    let url = cluster.url_with(&format!("group_id={group}&{SESSION}"));
    let logs = Logs::new(&topic);
    let mut first = spawn_worker(0, &topic, &url, &logs);
    let mut second = spawn_worker(1, &topic, &url, &logs);
    let both_going = eventually(PATIENCE, || {
        let calls = logs.calls();
        (0..2).all(|w| calls.iter().filter(|(n, _)| *n == w).count() >= 20)
    })
    .await;
    assert!(both_going, "both workers handle records");
    first.start_kill().expect("SIGKILL");
    let killed = Instant::now();
    first.wait().await.expect("the killed worker is reaped");

    let drained = eventually(PATIENCE, || {
        let seen: BTreeSet<u64> = logs.calls().iter().filter_map(|(_, c)| c.seq).collect();
        confirmed.is_subset(&seen)
    })
    .await;
    // A graceful stop of the survivor: it commits what it handled and leaves.
    let pid = second.id().expect("the survivor runs");
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    tokio::time::timeout(Duration::from_secs(30), second.wait())
        .await
        .expect("the survivor stops")
        .expect("reaped");
    let stranded = cluster.lag(&topic, &group);

    let records = cluster.read_all(&topic).await;
    let of = partitions_of(&records);
    let calls = logs.calls();
    let owned_by_first: BTreeSet<i32> = calls
        .iter()
        .filter(|(n, c)| *n == 0 && c.at < killed && killed - c.at < Duration::from_secs(1))
        .filter_map(|(_, c)| c.seq.and_then(|s| of.get(&s)))
        .flatten()
        .copied()
        .collect();
    let taken_over = calls
        .iter()
        .filter(|(n, c)| *n == 1 && c.at > killed)
        .filter(|(_, c)| {
            c.seq
                .and_then(|s| of.get(&s))
                .is_some_and(|ps| ps.iter().any(|p| owned_by_first.contains(p)))
        })
        .map(|(_, c)| c.at)
        .min();
    let per_worker: BTreeMap<usize, usize> = calls.iter().fold(BTreeMap::new(), |mut m, (n, _)| {
        *m.entry(*n).or_default() += 1;
        m
    });
    let log: Vec<Handled> = calls.iter().map(|(_, c)| *c).collect();
    let t = tally(&confirmed, &log);
    println!(
        "HA-ROW kafka two workers, one SIGKILLed (session.timeout.ms=6000): {} confirmed, {} \
         handled (by worker: {per_worker:?}), lost {}, duplicates {}, stranded {stranded}, \
         corrupt {}; the killed worker was handling partitions {owned_by_first:?} in its last second; the survivor handled \
         the first of them {} after the kill",
        t.confirmed,
        t.handled,
        t.lost,
        t.duplicates,
        t.corrupt,
        taken_over.map_or("never".to_owned(), |at| format!("{} ms", ms(at - killed))),
    );
    if t.lost > 0 {
        let seen: BTreeSet<u64> = log.iter().filter_map(|c| c.seq).collect();
        let missing: Vec<(u64, Vec<(i32, i64)>)> = confirmed
            .difference(&seen)
            .take(10)
            .map(|s| {
                let at = records
                    .iter()
                    .filter(|(_, _, v)| {
                        serde_json::from_slice::<Value>(v)
                            .ok()
                            .and_then(|e| seq_of(&e["data"]))
                            == Some(*s)
                    })
                    .map(|(p, o, _)| (*p, *o))
                    .collect();
                (*s, at)
            })
            .collect();
        println!("HA-LOST (seq, [(partition, offset)]): {missing:?}");
    }
    assert_eq!(t.confirmed as u64, MESSAGES);
    assert!(drained, "not every confirmed message was handled");
    assert_eq!(t.lost, 0, "lost");
    assert_eq!(stranded, 0, "left uncommitted");
    assert_eq!(t.corrupt, 0, "corrupted");
    assert!(
        taken_over.is_some(),
        "the survivor never took the killed worker's partitions"
    );
}
