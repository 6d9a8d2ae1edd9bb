//! A node of the three-node cluster killed with SIGKILL under a worker and under a publisher:
//! the worker moves to a live node and goes on, nothing is lost, and what is handled twice is
//! counted, for quorum and classic queues alike (the figures in docs/transports/amqp.md come
//! from the `failover:` lines these tests print; run them with `--nocapture`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, Transport};
use babelqueue_transport_amqp::{AmqpTransport, QueueType};
use serde_json::json;
use tokio::time::Instant;

use crate::cluster::{Cluster, node_name};
use crate::common::{self, Raw};

const URN: &str = "urn:babel:orders:created";

/// Messages in the stream, handlers at once, and each handler's time: the stream lasts about
/// four and a half seconds and the node dies a third of the way in, with the worker's
/// prefetch (32) and its eight handlers in flight.
const N: usize = 600;
const CONCURRENCY: usize = 8;
const PACE: Duration = Duration::from_millis(60);
/// How long a classic queue's node stays down: its queue is unavailable until it is back.
const CLASSIC_OUTAGE: Duration = Duration::from_secs(5);

/// Which node dies. The queue's leader (quorum) or home (classic) is node 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Victim {
    /// Node 0: the queue's leader, and the node the worker is connected to.
    LeaderAndWorker,
    /// Node 0, the queue's leader; the worker is connected to node 1.
    LeaderOnly,
    /// Node 1, the worker's node; the queue's leader stays on node 0.
    WorkerOnly,
}

impl Victim {
    /// The worker's first node and the node that dies.
    fn nodes(self) -> (usize, usize) {
        match self {
            Victim::LeaderAndWorker => (0, 0),
            Victim::LeaderOnly => (1, 0),
            Victim::WorkerOnly => (1, 1),
        }
    }
}

/// One handler call: the message, when it started and when it finished.
type Call = (String, Instant, Instant);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_leader_and_worker_node_killed_loses_nothing() {
    kill_mid_stream(QueueType::Quorum, Victim::LeaderAndWorker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_leader_killed_under_a_worker_elsewhere_loses_nothing() {
    kill_mid_stream(QueueType::Quorum, Victim::LeaderOnly).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_worker_node_killed_loses_nothing() {
    kill_mid_stream(QueueType::Quorum, Victim::WorkerOnly).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_home_and_worker_node_killed_loses_nothing_once_it_is_back() {
    kill_mid_stream(QueueType::Classic, Victim::LeaderAndWorker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_home_killed_under_a_worker_elsewhere_loses_nothing_once_it_is_back() {
    kill_mid_stream(QueueType::Classic, Victim::LeaderOnly).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_worker_node_killed_loses_nothing() {
    kill_mid_stream(QueueType::Classic, Victim::WorkerOnly).await;
}

async fn kill_mid_stream(queue_type: QueueType, victim: Victim) {
    let Some(cluster) = Cluster::up().await else {
        return;
    };
    let _restart = cluster.restart_on_drop();
    common::init_tracing();
    let query = format!("?queue_type={queue_type}");
    let q = common::queue(&format!("kill-{queue_type}"));

    // The queue is declared by a client of node 0: its leader (or home) is there.
    let producer_transport = AmqpTransport::connect(&cluster.url_of(0, &query))
        .await
        .unwrap();
    let producer = App::builder(producer_transport.clone())
        .queue(&q)
        .build()
        .unwrap();
    let envelopes: Vec<Envelope> = (0..N)
        .map(|i| {
            Envelope::builder(URN)
                .queue(q.clone())
                .data(&json!({ "i": i }))
                .build()
                .unwrap()
        })
        .collect();
    let ids: HashSet<String> = envelopes
        .iter()
        .map(|e| e.message_id().unwrap_or_default().into_owned())
        .collect();
    producer.publish_batch(&q, &envelopes).await.unwrap();
    producer_transport.close().await.unwrap();
    let state = cluster.queue(&q).expect("the queue exists");
    assert_eq!(state.kind, queue_type.as_str(), "{state:?}");
    assert_eq!(state.node, Some(0), "the queue lives on node 0: {state:?}");

    let (worker_node, victim_node) = victim.nodes();
    let transport = AmqpTransport::connect(&cluster.url_from(worker_node, &query))
        .await
        .unwrap();
    let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
    let recorded = calls.clone();
    let worker = App::builder(transport.clone())
        .queue(&q)
        .concurrency(CONCURRENCY)
        .poll_timeout(Duration::from_millis(250))
        .handle(URN, move |ctx: Context| {
            let recorded = recorded.clone();
            async move {
                let started = Instant::now();
                tokio::time::sleep(PACE).await;
                let id = ctx.envelope().message_id().unwrap_or_default().into_owned();
                recorded.lock().unwrap().push((id, started, Instant::now()));
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let stop = worker.stop_handle();
    let running =
        tokio::spawn(async move { worker.consume(Consume::new().handle_signals(false)).await });

    let distinct = |calls: &Arc<Mutex<Vec<Call>>>| {
        let calls = calls.lock().unwrap();
        calls.iter().map(|c| c.0.clone()).collect::<HashSet<_>>()
    };
    let wait_for = |target: usize, within: Duration| {
        let calls = calls.clone();
        async move {
            let deadline = Instant::now() + within;
            while distinct(&calls).len() < target && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            distinct(&calls).len()
        }
    };
    let started = wait_for(N / 3, Duration::from_secs(60)).await;
    assert!(started >= N / 3, "the worker started: {started} of {N}");

    // What was handled when the signal went out; the node dies within milliseconds.
    let before: HashSet<String> = distinct(&calls);
    let killed_at = Instant::now();
    tokio::task::block_in_place(|| cluster.kill(victim_node));
    assert!(before.len() < N, "the node must die mid-stream");
    // A classic queue is unavailable while its node is down: it comes back with the node.
    let home_down = queue_type == QueueType::Classic && victim_node == 0;
    if home_down {
        tokio::time::sleep(CLASSIC_OUTAGE).await;
        cluster_restart(&cluster).await;
    }
    let handled = wait_for(N, Duration::from_secs(120)).await;
    let drained = killed_at.elapsed();
    // Late duplicates (a redelivery of something already handled) are counted too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !running.is_finished(),
        "the worker survived the node's death"
    );
    stop.stop();
    let summary = tokio::time::timeout(Duration::from_secs(45), running)
        .await
        .expect("the worker stopped when asked")
        .unwrap()
        .unwrap();
    transport.close().await.unwrap();

    let calls = calls.lock().unwrap().clone();
    let mut times: HashMap<&str, usize> = HashMap::new();
    for (id, _, _) in &calls {
        *times.entry(id.as_str()).or_default() += 1;
    }
    let lost = ids
        .iter()
        .filter(|id| !times.contains_key(id.as_str()))
        .count();
    let duplicates = calls.len() - times.len();
    let again = before.iter().filter(|id| times[id.as_str()] > 1).count();
    // The longest pause in handler starts from the kill on: how long the worker stood still.
    let mut starts: Vec<Instant> = calls
        .iter()
        .map(|c| c.1)
        .filter(|s| *s >= killed_at)
        .collect();
    starts.sort();
    let stall = starts
        .iter()
        .scan(killed_at, |last, s| {
            let gap = s.duration_since(*last);
            *last = *s;
            Some(gap)
        })
        .max()
        .unwrap_or_default();
    // What the broker still holds once the worker is gone (its unacknowledged deliveries are
    // back by then), read through a live node: stranded messages.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let raw = Raw::new(&cluster.url_of((victim_node + 1) % 3, "")).await;
    let stranded = raw.ready(&q).await;
    let state = cluster.queue(&q).expect("the queue still exists");
    println!(
        "failover: queue_type={queue_type} killed={} ({victim:?}) n={N} concurrency={CONCURRENCY} \
         handled_before_kill={} lost={lost} duplicates={duplicates} \
         handled_again_of_those_before_kill={again} ({:.1}%) stranded={stranded} \
         longest_stall={stall:?} kill_to_all_handled={drained:?} reconnects={} leader_after={:?}",
        node_name(victim_node),
        before.len(),
        100.0 * again as f64 / before.len().max(1) as f64,
        transport.reconnects(),
        state.node.map(node_name),
    );
    assert_eq!(handled, N, "every message handled at least once");
    assert_eq!(lost, 0, "nothing lost");
    assert_eq!(stranded, 0, "nothing stranded");
    assert!(summary.processed >= N as u64, "{summary:?}");
    if queue_type == QueueType::Quorum {
        // Acknowledgements survive on the quorum: only what was in flight when the node died
        // (the worker's window of 32 deliveries and its 8 handlers) can come back.
        assert!(
            again <= 40,
            "{again} of the {} messages handled before the kill were handled again",
            before.len()
        );
    }
    cluster.delete(&[&q]);
}

/// Starts the killed nodes again, the handlers running on meanwhile.
async fn cluster_restart(cluster: &Cluster) {
    tokio::task::block_in_place(|| cluster.restart());
}

/// A publisher connected to the quorum queue's leader, sending one confirmed message after
/// another, while that node is killed: it moves to a live node and goes on; every publish that
/// returned `Ok` is in the queue (a confirm is never assumed), and a publish whose confirm
/// died with the node was sent again (a duplicate at worst) or reported failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_moves_to_a_live_node_and_every_confirmed_message_arrives() {
    let Some(cluster) = Cluster::up().await else {
        return;
    };
    let _restart = cluster.restart_on_drop();
    common::init_tracing();
    let query = "?queue_type=quorum";
    let q = common::queue("publish-failover");
    let transport = AmqpTransport::connect(&cluster.url_from(0, query))
        .await
        .unwrap();
    transport.publish(&q, b"{\"first\":true}").await.unwrap();
    assert_eq!(cluster.queue(&q).and_then(|s| s.node), Some(0));

    let total = 400;
    let (mut confirmed, mut failed) = (Vec::new(), Vec::new());
    let mut killed_at = None;
    let mut first_after_kill = None;
    for i in 0..total {
        if i == total / 3 {
            killed_at = Some(Instant::now());
            tokio::task::block_in_place(|| cluster.kill(0));
        }
        let body = format!("{{\"i\":{i}}}");
        match transport.publish(&q, body.as_bytes()).await {
            Ok(()) => {
                if killed_at.is_some() && first_after_kill.is_none() {
                    first_after_kill = killed_at.map(|k| k.elapsed());
                }
                confirmed.push(body);
            }
            Err(e) => failed.push((body, e.to_string())),
        }
    }
    // Everything in the queue, read through another node.
    let reader = AmqpTransport::connect(&cluster.url_from(1, query))
        .await
        .unwrap();
    let mut received: HashMap<String, usize> = HashMap::new();
    while let Some(d) = reader.pop(&q, Duration::from_secs(3)).await.unwrap() {
        *received
            .entry(String::from_utf8_lossy(d.body()).into_owned())
            .or_default() += 1;
        reader.ack(&d).await.unwrap();
    }
    let lost: Vec<&String> = confirmed
        .iter()
        .filter(|b| !received.contains_key(*b))
        .collect();
    let duplicates: usize = received.values().map(|n| n - 1).sum();
    println!(
        "failover: publisher on {} killed after {} of {total} confirmed publishes: \
         confirmed={} failed={} lost_of_confirmed={} duplicates={duplicates} \
         first_confirm_after_kill={first_after_kill:?} reconnects={}",
        node_name(0),
        total / 3,
        confirmed.len(),
        failed.len(),
        lost.len(),
        transport.reconnects()
    );
    assert!(lost.is_empty(), "confirmed and lost: {lost:?}");
    assert!(
        failed.is_empty(),
        "every publish went through a live node: {failed:?}"
    );
    assert!(
        transport.reconnects() >= 1,
        "the publisher moved to a live node"
    );
    transport.close().await.unwrap();
    reader.close().await.unwrap();
    cluster.delete(&[&q]);
}
