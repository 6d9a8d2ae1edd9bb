//! What a confirmed write survives under acks=all (the default) and acks=1, in one unclean
//! scenario: the leader keeps taking writes while both followers lag, then dies.
//!
//! The method: a one-partition topic on three replicas; 200 messages confirmed with all three
//! nodes running; both followers SIGSTOPped (their fetches stop; with two of three controllers
//! paused, the quorum cannot shrink the ISR, so they stay eligible leaders); messages
//! published one after another for 3 s; the leader SIGKILLed and the followers SIGCONTed; a
//! follower becomes leader (a clean election: it is in the ISR) with the log it had when it was
//! paused; the old leader comes back and truncates to it. The publisher keeps going until the
//! new leader is there. Then every message confirmed is looked for in the topic.
//!
//! With acks=1 every message confirmed during the pause was on the dead leader alone: lost.
//! With acks=all none is confirmed during the pause (each waits for the followers); the one in
//! flight is confirmed by the new leader after the failover, and nothing is lost.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use babelqueue_testkit::unique_queue;

use crate::cluster::Cluster;
use crate::failover::replicated_topic;
use crate::workload::{PATIENCE, Published, ms, publish_confirmed, publisher, stored};
use crate::{Restore, serial};

const BEFORE: u64 = 200;
const PAUSE: Duration = Duration::from_secs(3);

/// One row: what was confirmed, when, and what the topic kept.
#[derive(Debug)]
struct Row {
    confirmed: usize,
    confirmed_while_paused: usize,
    lost: usize,
    failover: Duration,
    failures: usize,
}

async fn unclean_failover(cluster: &Cluster, acks: &str) -> Row {
    let restore = Restore(cluster.clone());
    let topic = unique_queue(&format!("ha-acks-{acks}"));
    replicated_topic(cluster, &topic, 1, "").await;
    let state = cluster.partitions(&topic)[0].clone();
    let leader = state.leader;
    let followers: Vec<i32> = state
        .replicas
        .iter()
        .copied()
        .filter(|n| *n != leader)
        .collect();

    let url = cluster.url_with(&format!("acks={acks}&delivery_timeout_ms=110000"));
    let app = publisher(&url, &topic).await;
    let mut published = Published::default();
    for seq in 0..BEFORE {
        publish_confirmed(&app, seq, &mut published).await;
    }

    for f in &followers {
        cluster.signal(*f, "STOP");
    }
    let paused = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let publishing = tokio::spawn({
        let (app, stop) = (app.clone(), stop.clone());
        async move {
            let mut published = Published::default();
            let mut seq = BEFORE;
            while !stop.load(Ordering::SeqCst) {
                publish_confirmed(&app, seq, &mut published).await;
                seq += 1;
            }
            published
        }
    });
    tokio::time::sleep(PAUSE).await;
    let killed = cluster.kill(leader).await;
    for f in &followers {
        cluster.signal(*f, "CONT");
    }
    let moved = cluster
        .wait_for_partitions(&topic, PATIENCE, |p| p.leader > 0 && p.leader != leader)
        .await
        .expect("a follower takes over");
    let failover = killed.elapsed();
    // A little more publishing on the new leader, then the dead one comes back.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    let during = publishing.await.expect("the publisher");
    drop(restore);
    cluster
        .wait_for_partitions(&topic, PATIENCE, |p| p.isr.len() == 3)
        .await
        .expect("the old leader back in sync");

    let confirmed_while_paused = during.confirmed.values().filter(|at| **at < killed).count();
    let failures = during.failures;
    published.confirmed.extend(during.confirmed);
    let confirmed: BTreeSet<u64> = published.confirmed.keys().copied().collect();
    let kept = stored(&cluster.read_all(&topic).await);
    let lost = confirmed.difference(&kept).count();
    println!(
        "HA-ROW kafka unclean leader death acks={acks} RF3 min.insync=2: {} confirmed \
         ({} while the followers were paused {} ms), lost {lost}; leader {leader} SIGKILLed, \
         node {} leads {} ms later; {failures} publish calls failed and were tried again",
        confirmed.len(),
        confirmed_while_paused,
        ms(paused.elapsed().min(PAUSE)),
        moved[0].leader,
        ms(failover),
    );
    Row {
        confirmed: confirmed.len(),
        confirmed_while_paused,
        lost,
        failover,
        failures,
    }
}

/// acks=all: a leader that dies while its followers lag loses no confirmed write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_loses_no_confirmed_write_when_the_leader_dies_ahead_of_its_followers() {
    let _serial = serial().await;
    let Some(cluster) = Cluster::from_env().await else {
        return;
    };
    let row = unclean_failover(&cluster, "all").await;
    assert_eq!(row.lost, 0, "{row:?}");
    assert_eq!(
        row.confirmed_while_paused, 0,
        "acks=all confirmed a write no follower had: {row:?}"
    );
    assert!(
        row.confirmed as u64 > BEFORE,
        "nothing confirmed after the failover: {row:?}"
    );
    let _ = (row.failover, row.failures);
}

/// acks=1, the same scenario: the writes confirmed by the leader alone while its followers lag
/// are gone after it dies. The test fails if nothing is lost: then the scenario would not show
/// what acks=all prevents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_1_loses_the_writes_only_the_dead_leader_had() {
    let _serial = serial().await;
    let Some(cluster) = Cluster::from_env().await else {
        return;
    };
    let row = unclean_failover(&cluster, "1").await;
    assert!(row.confirmed_while_paused > 0, "{row:?}");
    assert!(row.lost > 0, "acks=1 lost nothing: {row:?}");
    assert!(row.lost <= row.confirmed_while_paused + 1, "{row:?}");
}
