//! The transport on the three-server cluster of `scripts/brokers.sh up nats-cluster`, through
//! its URL (all three servers).
//!
//! A server killed with SIGKILL under a worker, and the count afterwards: every message
//! published (and confirmed) before the kill handled, none left in the stream, none changed;
//! duplicates counted (the delivery is at least once); the time from the kill to the first
//! message pulled after it. Each run prints one row of numbers.
//!
//! * R3: a quarter of the way through, the server that leads the stream is killed, after the
//!   stream's and the consumer's leadership were moved onto the server the worker is connected
//!   to (the worst case: one kill takes the stream's leader, the consumer's leader and the
//!   worker's connection). A new leader takes over and the worker goes on. Nothing may be lost.
//! * R1: the one server that holds the stream is killed; the queue is unavailable (nothing
//!   handled, a publish refused) until that server is started again, then nothing is lost
//!   (file storage survives a SIGKILL of the process).
//!
//! And `replicas=`: a stream is created with that many, and an existing stream with fewer is
//! refused.
//!
//! A cluster that is not up prints `SKIPPED`; with `BQ_REQUIRE_HA` set it fails. The tests take
//! turns (they kill servers of one cluster).

#![allow(clippy::print_stdout)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use babelqueue_core::{
    App, Capabilities, Consume, Context, Delivery, HandlerError, Headers, Outgoing, Transport,
    TransportError, TransportErrorKind,
};
use babelqueue_envelope::RawJson;
use babelqueue_transport_nats::NatsTransport;
use common::{Cluster, consumer_leader, lead_from, placement, settled};

const URN: &str = "urn:babel:failover:item";
/// Messages published (each confirmed) before the worker starts.
const MESSAGES: usize = 500;
/// How long an unsettled delivery stays reserved before JetStream hands it out again.
const ACK_WAIT: Duration = Duration::from_secs(5);
/// Every step of a run gives up after this.
const DEADLINE: Duration = Duration::from_secs(120);

/// One at a time: the tests kill servers of the one cluster.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The `data` of message `n`: its number and a text that depends on it, so a changed or swapped
/// body shows.
fn data_of(n: usize) -> String {
    format!(
        "{{\"n\":{n},\"check\":\"{:016x}\"}}",
        (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    )
}

/// What one pull did: when it was sent, when it returned, whether it brought a message, its
/// error.
#[derive(Debug, Clone)]
struct Pull {
    sent: Instant,
    returned: Instant,
    got: bool,
    error: Option<String>,
}

#[derive(Debug, Default)]
struct Seen {
    pulls: Vec<Pull>,
    ack_errors: Vec<String>,
    /// (n, data as handled, attempts, when).
    handled: Vec<(usize, String, i64, Instant)>,
}

/// The NATS transport with every pull and acknowledgement written down.
#[derive(Debug, Clone)]
struct Watched {
    inner: NatsTransport,
    seen: Arc<Mutex<Seen>>,
}

#[async_trait]
impl Transport for Watched {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        self.inner.publish(queue, body).await
    }

    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        self.inner.send(outgoing).await
    }
    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        let sent = Instant::now();
        let popped = self.inner.pop(queue, timeout).await;
        self.seen.lock().unwrap().pulls.push(Pull {
            sent,
            returned: Instant::now(),
            got: matches!(popped, Ok(Some(_))),
            error: popped.as_ref().err().map(ToString::to_string),
        });
        popped
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        let acked = self.inner.ack(delivery).await;
        if let Err(e) = &acked {
            self.seen.lock().unwrap().ack_errors.push(e.to_string());
        }
        acked
    }
    async fn prepare_consume(&self, queue: &str, held: usize) -> Result<(), TransportError> {
        self.inner.prepare_consume(queue, held).await
    }
    fn capabilities(&self) -> Capabilities<'_> {
        self.inner.capabilities()
    }
}

/// What a run measured.
#[derive(Debug)]
struct Row {
    lost: usize,
    duplicates: usize,
    stranded: u64,
    corrupt: usize,
    /// From the kill to the first message that a pull sent after the kill brought.
    recovery: Option<Duration>,
    /// Messages handled from pulls sent after the kill and before the restart.
    during_outage: usize,
}

/// Waits until `test` holds, checking every 20 ms, for `DEADLINE` at most.
async fn until(what: &str, mut test: impl FnMut() -> bool) {
    let since = Instant::now();
    while !test() {
        assert!(
            since.elapsed() < DEADLINE,
            "{what}: not within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Publishes `MESSAGES` confirmed messages on a stream of `replicas`, consumes them at
/// concurrency 4, and a quarter of the way through SIGKILLs the stream's leader; with
/// `outage`, starts it again that long after the kill (else after the drain).
async fn failover(cluster: &Cluster, replicas: usize, outage: Option<Duration>) -> Row {
    let label = format!("nats R{replicas} stream-leader kill");
    let url = cluster.url_with(&format!(
        "replicas={replicas}&ack_wait={}",
        ACK_WAIT.as_secs()
    ));
    let transport = NatsTransport::connect(&url)
        .await
        .expect("the cluster answers");
    let js = transport.jetstream().clone();
    let queue = babelqueue_testkit::unique_queue(&format!("failover-r{replicas}"));
    let stream = transport.options().stream_name(&queue).unwrap();
    let consumer = transport.options().consumer.clone();
    transport.ensure_stream(&queue).await.unwrap();
    transport.prepare_consume(&queue, 4).await.unwrap();
    settled(&js, &stream, replicas - 1, DEADLINE).await;
    // The worker's connection is on this server; with replicas, the stream's and the
    // consumer's leaders are moved there too, so the kill takes all three at once.
    let connected = js.client().server_info().server_name;
    if replicas > 1 {
        lead_from(&js, &stream, &consumer, &connected).await;
    }

    let seen = Arc::new(Mutex::new(Seen::default()));
    let watched = Watched {
        inner: transport.clone(),
        seen: seen.clone(),
    };
    let record = seen.clone();
    let app = App::builder(watched)
        .queue(&queue)
        .concurrency(4)
        .max_attempts(100)
        .dead_letter(true)
        .poll_timeout(Duration::from_millis(500))
        .handle(URN, move |ctx: Context| {
            let record = record.clone();
            async move {
                let n = ctx
                    .data()
                    .as_str()
                    .strip_prefix("{\"n\":")
                    .and_then(|rest| rest.split(',').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(usize::MAX);
                record.lock().unwrap().handled.push((
                    n,
                    ctx.data().as_str().to_owned(),
                    ctx.attempts(),
                    Instant::now(),
                ));
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    for n in 0..MESSAGES {
        let data = RawJson::parse(&data_of(n)).unwrap();
        let envelope = app.envelope(URN).data_raw(data).build().unwrap();
        app.publish_envelope(&queue, &envelope, &Headers::new())
            .await
            .unwrap_or_else(|e| panic!("publish {n} was not confirmed: {e}"));
    }

    let stop = app.stop_handle();
    let worker = tokio::spawn({
        let app = app.clone();
        async move { app.consume(Consume::new().handle_signals(false)).await }
    });
    let handled = || seen.lock().unwrap().handled.len();
    until("a quarter handled", || handled() >= MESSAGES / 4).await;
    let leader = settled(&js, &stream, 0, DEADLINE).await;
    let consumer_led = consumer_leader(&js, &stream, &consumer).await;
    cluster.kill(&leader).await;
    // From here on the server is gone: a pull sent later cannot have reached it.
    let killed_at = Instant::now();
    let at_kill = handled();

    let mut restarted_at = None;
    let mut refused = None;
    if let Some(outage) = outage {
        // While the one copy is down, a publish cannot be confirmed.
        let publish = tokio::time::timeout(DEADLINE, transport.publish(&queue, b"{}")).await;
        refused = Some(match publish {
            Ok(Ok(())) => "confirmed".to_owned(),
            Ok(Err(e)) => format!("refused after {:?}: {e}", killed_at.elapsed()),
            Err(_) => "no answer".to_owned(),
        });
        tokio::time::sleep(outage.saturating_sub(killed_at.elapsed())).await;
        restarted_at = Some(Instant::now());
        cluster.restart(&leader).await;
    }
    let distinct = || {
        let seen = seen.lock().unwrap();
        seen.handled
            .iter()
            .map(|h| h.0)
            .filter(|&n| n < MESSAGES)
            .collect::<BTreeSet<_>>()
            .len()
    };
    let since = Instant::now();
    while distinct() < MESSAGES && since.elapsed() < DEADLINE {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Deliveries whose acknowledgement was lost come back after the ack wait: let them.
    tokio::time::sleep(ACK_WAIT + Duration::from_secs(2)).await;
    stop.stop();
    let summary = worker.await.unwrap().expect("the worker ran to the end");
    if outage.is_none() {
        cluster.restart(&leader).await;
    }
    let new_leader = settled(&js, &stream, replicas - 1, DEADLINE).await;

    // The count.
    let dead_lettered = transport
        .capabilities()
        .browser()
        .unwrap()
        .browse(&format!("{queue}.dlq"), 0)
        .await
        .unwrap()
        .len();
    let mut info = js.get_stream(&stream).await.unwrap();
    let stored = info.info().await.unwrap().state.messages;
    let row = {
        let seen = seen.lock().unwrap();
        let mut calls: BTreeMap<usize, usize> = BTreeMap::new();
        let mut corrupt = 0;
        for (n, data, _, _) in &seen.handled {
            *calls.entry(*n).or_default() += 1;
            if *n >= MESSAGES || *data != data_of(*n) {
                corrupt += 1;
            }
        }
        let lost = (0..MESSAGES).filter(|n| !calls.contains_key(n)).count();
        let duplicates = seen.handled.len() - calls.len();
        // the one message published during an R1 outage, when it was confirmed after all
        let extra = u64::from(refused.as_deref() == Some("confirmed"));
        let stranded = stored.saturating_sub(extra);
        let after_kill = |p: &&Pull| p.sent >= killed_at && p.got;
        let first = seen
            .pulls
            .iter()
            .filter(after_kill)
            .map(|p| p.returned)
            .min();
        let recovery = first.map(|t| t - killed_at);
        let during_outage = restarted_at.map_or(0, |restart| {
            seen.pulls
                .iter()
                .filter(after_kill)
                .filter(|p| p.returned < restart)
                .count()
        });
        let pull_errors: Vec<String> = seen
            .pulls
            .iter()
            .filter(|p| p.returned >= killed_at)
            .filter_map(|p| p.error.clone())
            .collect();
        let stall = seen
            .pulls
            .iter()
            .filter(|p| p.returned >= killed_at && p.error.is_none() && !p.got)
            .map(|p| p.returned - p.sent)
            .max();

        println!(
            "{label}: published {MESSAGES} (each confirmed), killed {leader} (the stream's leader; \
             consumer's leader {consumer_led:?}, the worker connected to {connected}) with {at_kill} \
             handled, new leader {new_leader}; handled {} distinct in {} calls; lost {lost}, duplicates \
             {duplicates}, stranded {stranded}, corrupt {}, dead-lettered {dead_lettered}; recovery \
             {} (kill to the first message pulled after it){}; {} pull errors after the kill, {} ack \
             errors; longest empty pull after the kill {stall:?}; worker summary {summary:?}",
            calls.len(),
            seen.handled.len(),
            corrupt + dead_lettered,
            recovery.map_or("never".to_owned(), |d| format!("{:.2} s", d.as_secs_f64())),
            restarted_at.map_or(String::new(), |r| format!(
                ", restarted after {:.2} s, first message {:.2} s after the restart, {during_outage} \
                 handled during the outage, a publish during the outage: {}",
                (r - killed_at).as_secs_f64(),
                first.map_or(f64::NAN, |f| f.saturating_duration_since(r).as_secs_f64()),
                refused.as_deref().unwrap_or("-")
            )),
            pull_errors.len(),
            seen.ack_errors.len(),
        );
        for e in pull_errors.iter().collect::<BTreeSet<_>>() {
            println!("  pull error: {e}");
        }
        for e in seen.ack_errors.iter().collect::<BTreeSet<_>>() {
            println!("  ack error: {e}");
        }
        Row {
            lost,
            duplicates,
            stranded,
            corrupt: corrupt + dead_lettered,
            recovery,
            during_outage,
        }
    };
    let _ = js.delete_stream(&stream).await;
    let dlq = transport
        .options()
        .stream_name(&format!("{queue}.dlq"))
        .unwrap();
    let _ = js.delete_stream(&dlq).await;
    row
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_of_an_r3_stream_loses_nothing() {
    let Some(cluster) = Cluster::from_env().await else {
        return;
    };
    let _turn = TURN.lock().await;
    let row = failover(&cluster, 3, None).await;
    cluster.heal().await;
    assert_eq!(
        (row.lost, row.stranded, row.corrupt),
        (0, 0, 0),
        "lost, stranded, corrupt: {row:?}"
    );
    let recovery = row.recovery.expect("messages after the kill");
    assert!(recovery < Duration::from_secs(30), "{row:?}");
    println!("duplicates {} (allowed: at least once)", row.duplicates);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_r1_stream_is_unavailable_while_its_server_is_down_and_loses_nothing_after() {
    let Some(cluster) = Cluster::from_env().await else {
        return;
    };
    let _turn = TURN.lock().await;
    let outage = Duration::from_secs(10);
    let row = failover(&cluster, 1, Some(outage)).await;
    cluster.heal().await;
    assert_eq!(
        row.during_outage, 0,
        "handled while the copy was down: {row:?}"
    );
    assert_eq!(
        (row.lost, row.stranded, row.corrupt),
        (0, 0, 0),
        "lost, stranded, corrupt: {row:?}"
    );
    let recovery = row.recovery.expect("messages after the restart");
    assert!(recovery >= outage, "{row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_make_the_stream_and_an_existing_stream_with_fewer_is_refused() {
    let Some(cluster) = Cluster::from_env().await else {
        return;
    };
    let _turn = TURN.lock().await;
    let queue = babelqueue_testkit::unique_queue("replicas");
    let one = NatsTransport::connect(&cluster.url_with("replicas=1"))
        .await
        .unwrap();
    let three = NatsTransport::connect(&cluster.url_with("replicas=3"))
        .await
        .unwrap();
    let stream = one.options().stream_name(&queue).unwrap();

    // Made by a worker with the default: one copy. A worker that asks for three refuses it,
    // and says what to do; nothing is published.
    one.publish(&queue, b"first").await.unwrap();
    let err = three.publish(&queue, b"second").await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Config, "{err}");
    let said = err.to_string();
    for part in [
        "exists with 1 replica(s)",
        "replicas=3",
        &format!("nats stream edit {stream} --replicas 3"),
    ] {
        assert!(said.contains(part), "{part:?} in {said}");
    }
    let err = three.prepare_consume(&queue, 1).await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Config, "{err}");
    let mut info = one.jetstream().get_stream(&stream).await.unwrap();
    let info = info.info().await.unwrap();
    assert_eq!((info.config.num_replicas, info.state.messages), (1, 1));
    one.jetstream().delete_stream(&stream).await.unwrap();

    // Made by a worker that asks for three: three copies, and a worker with the default uses
    // it as it is.
    three.publish(&queue, b"third").await.unwrap();
    settled(three.jetstream(), &stream, 2, DEADLINE).await;
    one.publish(&queue, b"fourth").await.unwrap();
    let mut info = one.jetstream().get_stream(&stream).await.unwrap();
    let info = info.info().await.unwrap();
    assert_eq!((info.config.num_replicas, info.state.messages), (3, 2));
    assert_eq!(
        placement(one.jetstream(), &stream).await.map(|p| p.1),
        Some(2)
    );
    one.jetstream().delete_stream(&stream).await.unwrap();
}
