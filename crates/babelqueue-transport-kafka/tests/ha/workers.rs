//! Two worker processes share the consumer group on the cluster; one is SIGKILLed mid-stream
//! (it never leaves the group). The other takes its partitions once the session timeout (6 s
//! here) drops it: nothing lost, nothing left uncommitted, the duplicates and the rebalance
//! time printed.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError};
use babelqueue_testkit::unique_queue;
use babelqueue_transport_kafka::KafkaTransport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

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
/// normal run. It prints `HANDLED <seq>` (or `HANDLED corrupt`) per call, each taking 10 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_child_worker() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (topic, url) = spec.split_once(' ').expect("`topic url`");
    let app = App::builder(KafkaTransport::connect(url).await.expect("a transport"))
        .queue(topic)
        .handle(URN, |ctx: Context| async move {
            use std::io::Write as _;
            tokio::time::sleep(Duration::from_millis(10)).await;
            let seq = ctx.data_as::<Value>().ok().and_then(|d| seq_of(&d));
            let line = seq.map_or("HANDLED corrupt".to_owned(), |s| format!("HANDLED {s}"));
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").ok();
            out.flush().ok();
            Ok::<(), HandlerError>(())
        })
        .build()
        .unwrap();
    // SIGTERM: finish, commit, leave the group.
    app.consume(Consume::new()).await.unwrap();
}

type Calls = Arc<Mutex<Vec<(usize, Handled)>>>;

/// Starts worker process `n`, whose calls go to `calls`.
fn spawn_worker(n: usize, topic: &str, url: &str, calls: &Calls) -> tokio::process::Child {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "workers::ha_child_worker",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, format!("{topic} {url}"))
        .env_remove("BQ_REQUIRE_HA")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker process starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let calls = calls.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.strip_prefix("HANDLED ") {
                let seq = rest.trim().parse().ok();
                calls.lock().unwrap().push((
                    n,
                    Handled {
                        seq,
                        at: Instant::now(),
                    },
                ));
            }
        }
    });
    child
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
    let calls = Calls::default();
    let mut first = spawn_worker(0, &topic, &url, &calls);
    let mut second = spawn_worker(1, &topic, &url, &calls);
    let both_going = eventually(PATIENCE, || {
        let calls = calls.lock().unwrap();
        calls.iter().any(|(n, _)| *n == 0) && calls.iter().filter(|(n, _)| *n == 1).count() >= 20
    })
    .await;
    assert!(both_going, "both workers handle records");
    first.start_kill().expect("SIGKILL");
    let killed = Instant::now();
    first.wait().await.expect("the killed worker is reaped");

    let drained = eventually(PATIENCE, || {
        let seen: BTreeSet<u64> = calls
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, c)| c.seq)
            .collect();
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

    let of = partitions_of(&cluster.read_all(&topic).await);
    let calls = calls.lock().unwrap().clone();
    let owned_by_first: BTreeSet<i32> = calls
        .iter()
        .filter(|(n, c)| *n == 0 && c.at < killed)
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
         corrupt {}; the killed worker had partitions {owned_by_first:?}; the survivor handled \
         the first of them {} after the kill",
        t.confirmed,
        t.handled,
        t.lost,
        t.duplicates,
        t.corrupt,
        taken_over.map_or("never".to_owned(), |at| format!("{} ms", ms(at - killed))),
    );
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
