//! The partition leader SIGKILLed under a worker and a publisher (acks=all, the default), and
//! a write refused while too few replicas are in sync.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use babelqueue_testkit::unique_queue;
use babelqueue_transport_kafka::{KafkaOptions, RdKafkaClient};

use crate::cluster::Cluster;
use crate::workload::{
    Log, PATIENCE, Worker, eventually, ms, partitions_of, publish_all, publisher, tally,
};
use crate::{Restore, serial};

/// Messages in the leader-kill run.
const MESSAGES: u64 = 2_000;
const PARTITIONS: i32 = 8;

/// Creates `topic` on three replicas (and `min.insync.replicas` of `extra`, if any) and waits
/// until every partition has a leader and three replicas in sync.
pub async fn replicated_topic(cluster: &Cluster, topic: &str, partitions: i32, extra: &str) {
    let url = cluster.url_with(&format!("replication_factor=3{extra}"));
    RdKafkaClient::new(KafkaOptions::from_url(&url).unwrap())
        .create_topics(&[topic], partitions)
        .await
        .expect("the topic is created");
    cluster
        .wait_for_partitions(topic, Duration::from_secs(30), |p| {
            p.leader > 0 && p.isr.len() == 3 && p.replicas.len() == 3
        })
        .await
        .expect("every partition on three replicas in sync");
}

/// 2 000 messages published and confirmed with acks=all on an 8-partition topic (replication
/// factor 3, min.insync.replicas=2) while a worker consumes them; the broker leading most
/// partitions is SIGKILLed mid-stream. Nothing is lost, corrupted or left uncommitted;
/// duplicates are counted (at-least-once), and the time from the kill to the first record
/// handled after it, and to the first from a partition the dead broker led, is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_partition_leader_killed_mid_stream_loses_nothing() {
    let _serial = serial().await;
    let Some(cluster) = Cluster::from_env().await else {
        return;
    };
    let _restore = Restore(cluster.clone());
    let (topic, group) = (unique_queue("ha-leader-kill"), unique_queue("ha-group"));
    replicated_topic(&cluster, &topic, PARTITIONS, "").await;

    let log = Log::default();
    let worker_url = cluster.url_with(&format!(
        "group_id={group}&session.timeout.ms=6000&heartbeat.interval.ms=500"
    ));
    let worker = Worker::start(
        &worker_url,
        &topic,
        log.clone(),
        4,
        Duration::from_millis(2),
    )
    .await;
    let publishing = tokio::spawn({
        let (url, topic) = (cluster.url.clone(), topic.clone());
        async move { publish_all(&url, &topic, 0..MESSAGES, 4, Duration::from_millis(5)).await }
    });

    assert!(
        eventually(PATIENCE, || log.lock().unwrap().len() as u64
            >= MESSAGES / 4)
        .await,
        "the worker did not get going"
    );
    let (victim, led) = cluster.busiest_leader(&topic);
    let killed = cluster.kill(victim).await;
    let handled_at_kill = log.lock().unwrap().len();

    let published = publishing.await.expect("the publishers");
    let confirmed: BTreeSet<u64> = published.confirmed.keys().copied().collect();
    let drained = eventually(PATIENCE, || {
        let seen: BTreeSet<u64> = log.lock().unwrap().iter().filter_map(|c| c.seq).collect();
        confirmed.is_subset(&seen)
    })
    .await;
    worker.stop().await;
    let stranded = cluster.lag(&topic, &group);
    let after = cluster.partitions(&topic);
    let records = cluster.read_all(&topic).await;
    let of = partitions_of(&records);
    let calls = log.lock().unwrap().clone();
    let t = tally(&confirmed, &calls);

    let first_after = calls.iter().filter(|c| c.at > killed).map(|c| c.at).min();
    let first_from_led = calls
        .iter()
        .filter(|c| c.at > killed)
        .filter(|c| {
            c.seq
                .and_then(|s| of.get(&s))
                .is_some_and(|ps| ps.iter().any(|p| led.contains(p)))
        })
        .map(|c| c.at)
        .min();
    let confirmed_after_kill = published
        .confirmed
        .values()
        .filter(|at| **at > killed)
        .count();
    let since =
        |at: Option<Instant>| at.map_or("never".to_owned(), |at| format!("{} ms", ms(at - killed)));
    println!(
        "HA-ROW kafka leader-kill acks=all RF3 min.insync=2: {} published, {} confirmed, \
         {} handled ({} before the kill), lost {}, duplicates {}, stranded {stranded}, \
         corrupt {}; node {victim} led partitions {led:?} and was SIGKILLed; first record \
         handled after the kill {}, first from a partition it led {}; {} confirmed after the \
         kill, {} publish calls failed and were tried again (longest publish {} ms){}; leaders \
         after: {:?}",
        MESSAGES,
        t.confirmed,
        t.handled,
        handled_at_kill,
        t.lost,
        t.duplicates,
        t.corrupt,
        since(first_after),
        since(first_from_led),
        confirmed_after_kill,
        published.failures,
        ms(published.longest),
        if published.errors.is_empty() {
            String::new()
        } else {
            format!(" ({:?})", published.errors)
        },
        after
            .iter()
            .map(|p| (p.partition, p.leader))
            .collect::<Vec<_>>(),
    );
    assert_eq!(t.confirmed as u64, MESSAGES, "every message confirmed");
    assert!(drained, "the worker did not handle every confirmed message");
    assert_eq!(t.lost, 0, "lost");
    assert_eq!(stranded, 0, "left uncommitted in the group");
    assert_eq!(t.corrupt, 0, "corrupted");
    assert!(
        first_from_led.is_some(),
        "nothing handled from the dead leader's partitions"
    );
}

/// With fewer replicas in sync than `min.insync.replicas` (3 of 3 asked for, one broker
/// killed), a publish is refused, transient, and says which setting: never reported
/// confirmed. Once the broker is back, the same publish goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_in_sync_replicas_fail_the_publish_clearly() {
    let _serial = serial().await;
    let Some(cluster) = Cluster::from_env().await else {
        return;
    };
    let restore = Restore(cluster.clone());
    let topic = unique_queue("ha-min-isr");
    replicated_topic(&cluster, &topic, 1, "&min_insync_replicas=3").await;
    let state = &cluster.partitions(&topic)[0];
    let follower = *state
        .replicas
        .iter()
        .find(|n| **n != state.leader)
        .expect("a follower");
    cluster.kill(follower).await;
    cluster
        .wait_for_partitions(&topic, Duration::from_secs(60), |p| p.isr.len() == 2)
        .await
        .expect("the dead follower leaves the ISR");

    let url = cluster.url_with("delivery_timeout_ms=8000");
    let app = publisher(&url, &topic).await;
    let started = Instant::now();
    let refused = app
        .publish(crate::workload::URN, &crate::workload::payload(1))
        .await
        .expect_err("a write with two of three in sync and min.insync.replicas=3");
    let text = refused.to_string();
    println!(
        "HA-ROW kafka min.insync=3 with 2 in sync: refused after {} ms: {text}",
        ms(started.elapsed())
    );
    let kind = match &refused {
        babelqueue_core::Error::Transport(e) => Some(e.kind()),
        _ => None,
    };
    assert!(refused.is_transient(), "transient, got {kind:?}: {text}");
    assert!(text.contains("min.insync.replicas"), "{text}");
    assert!(cluster.read_all(&topic).await.is_empty(), "nothing stored");

    drop(restore);
    cluster
        .wait_for_partitions(&topic, PATIENCE, |p| p.isr.len() == 3)
        .await
        .expect("the follower back in sync");
    app.publish(crate::workload::URN, &crate::workload::payload(2))
        .await
        .expect("confirmed with three in sync");
}
