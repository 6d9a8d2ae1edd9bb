//! The outbox and its relay on the in-memory store and transport: no network, a paused clock
//! where back-off timing matters.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{
    Backoff, Delivery, Envelope, Headers, Jitter, MemoryTransport, Transport, TransportError,
};
use babelqueue_outbox::{
    ClaimedBatch, ErrorKind, MemoryOutbox, Outbox, OutboxId, OutboxMessage, OutboxRelay,
    OutboxStore, OutboxWriter, RelayBuilder, RelayReport, RowStatus, Settlement,
};

fn envelope(queue: &str, n: u32) -> Envelope {
    Envelope::builder("urn:babel:orders:created")
        .queue(queue)
        .trace_id(format!("trace-{n}"))
        .data(&serde_json::json!({"order_id": n, "note": "naïve ✓ \u{1F600}"}))
        .build()
        .unwrap()
}

fn backoff(base: f64, max: f64) -> Backoff {
    Backoff {
        base,
        multiplier: 2.0,
        max,
        jitter: Jitter::None,
    }
}

fn relay(transport: impl Transport + 'static, outbox: &MemoryOutbox) -> OutboxRelay {
    OutboxRelay::builder(transport, outbox.clone())
        .build()
        .unwrap()
}

#[tokio::test]
async fn write_stores_the_encoded_envelope_byte_for_byte_and_its_queue() {
    let outbox = MemoryOutbox::new();
    let env = envelope("orders", 1);
    let id = Outbox::new(&outbox).write(&env).await.unwrap();
    let row = outbox.row(&id).unwrap();
    assert_eq!(row.message.body(), env.encode().unwrap().as_bytes());
    assert_eq!(row.message.queue(), "orders");
    assert_eq!((row.status, row.attempts), (RowStatus::Pending, 0));
    assert!(row.message.headers().is_empty());
}

#[tokio::test]
async fn an_envelope_the_codec_refuses_stores_nothing() {
    let outbox = MemoryOutbox::new();
    let mut env = envelope("orders", 1);
    env.set("timestamp", babelqueue_core::RawJson::parse("1").unwrap());
    let err = Outbox::new(&outbox).write(&env).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidMessage);
    assert!(err.to_string().contains("/timestamp"), "{err}");
    assert!(outbox.rows().is_empty());
}

#[tokio::test]
async fn a_body_its_consumers_would_refuse_as_poison_stores_nothing() {
    let outbox = MemoryOutbox::new();
    let writer = Outbox::new(&outbox);
    let bad = Envelope::builder("urn:babel:orders:created")
        .queue("orders")
        .data_raw(babelqueue_core::RawJson::parse(r#"{"total":{"cents":1e400}}"#).unwrap())
        .build()
        .unwrap();
    for err in [
        writer.write(&bad).await.unwrap_err(),
        writer
            .write_with_headers(&bad, &Headers::new())
            .await
            .unwrap_err(),
        writer
            .write_message(&OutboxMessage::new(
                "orders",
                br#"{"job":"urn:x","data":{"n":-1e999}}"#.to_vec(),
            ))
            .await
            .unwrap_err(),
        writer
            .write_message(&OutboxMessage::new("orders", b"not json".to_vec()))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::InvalidMessage, "{err}");
    }
    let err = writer.write(&bad).await.unwrap_err();
    assert!(
        err.to_string()
            .ends_with("data.total.cents: 1e400 is not a finite number"),
        "{err}"
    );
    assert!(outbox.rows().is_empty());
}

#[tokio::test]
async fn a_rolled_back_transaction_publishes_nothing_a_committed_one_publishes_once() {
    let outbox = MemoryOutbox::new();
    let broker = MemoryTransport::new();
    let relay = relay(broker.clone(), &outbox);

    let tx = outbox.transaction();
    Outbox::new(&tx)
        .write(&envelope("orders", 1))
        .await
        .unwrap();
    assert!(outbox.rows().is_empty(), "not visible before commit");
    tx.rollback();
    let dropped = outbox.transaction();
    Outbox::new(&dropped)
        .write(&envelope("orders", 2))
        .await
        .unwrap();
    drop(dropped);
    assert_eq!(relay.drain().await.unwrap().published, 0);
    assert!(broker.is_empty("orders"));

    let env = envelope("orders", 3);
    let tx = outbox.transaction();
    Outbox::new(&tx).write(&env).await.unwrap();
    tx.commit();
    assert_eq!(relay.drain().await.unwrap().published, 1);
    assert_eq!(relay.drain().await.unwrap().published, 0);
    assert_eq!(
        broker.bodies("orders"),
        vec![env.encode().unwrap().into_bytes()]
    );
}

/// Bytes the codec would never write (spacing, key order, a 20-digit integer, an unknown
/// member), stored by `write_message` and published as they are.
const AUDIT: &[u8] =
    br#" { "data":{"n":12345678901234567890, "r":1.50}, "job" : "urn:babel:audit", "x":[] } "#;

#[tokio::test]
async fn flush_publishes_oldest_first_with_headers_and_marks_rows_published() {
    let outbox = MemoryOutbox::new();
    let broker = MemoryTransport::new();
    let mut headers = Headers::new();
    headers.insert(
        "traceparent".into(),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
    );
    let envs: Vec<Envelope> = (0..3).map(|n| envelope("orders", n)).collect();
    let writer = Outbox::new(&outbox);
    writer.write(&envs[0]).await.unwrap();
    writer.write_with_headers(&envs[1], &headers).await.unwrap();
    writer
        .write_message(&OutboxMessage::new("audit", AUDIT.to_vec()))
        .await
        .unwrap();
    writer.write(&envs[2]).await.unwrap();

    let report = relay(broker.clone(), &outbox).flush().await.unwrap();
    assert_eq!(
        report,
        RelayReport {
            published: 4,
            failed: 0,
            parked: 0,
            passes: 1
        }
    );
    let expected: Vec<Vec<u8>> = envs.iter().map(|e| e.encode().unwrap().into()).collect();
    assert_eq!(broker.bodies("orders"), expected);
    assert_eq!(broker.bodies("audit"), vec![AUDIT.to_vec()]);
    let sent_headers = broker.headers_of("orders");
    assert!(sent_headers[0].is_empty() && sent_headers[2].is_empty());
    assert_eq!(sent_headers[1], headers);
    assert_eq!(outbox.count(RowStatus::Published), 4);
    assert_eq!(outbox.pending_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn one_failing_row_never_blocks_the_rest_and_is_retried_after_its_backoff() {
    let outbox = MemoryOutbox::new();
    let broker = MemoryTransport::new();
    let writer = Outbox::new(&outbox);
    writer.write(&envelope("orders", 1)).await.unwrap();
    let bad = writer.write(&envelope("payments", 2)).await.unwrap();
    writer.write(&envelope("orders", 3)).await.unwrap();
    broker.fail_publishes_to("payments", true);

    let relay = OutboxRelay::builder(broker.clone(), outbox.clone())
        .backoff(backoff(2.0, 60.0))
        .build()
        .unwrap();
    let report = relay.flush().await.unwrap();
    assert_eq!((report.published, report.failed), (2, 1));
    assert_eq!(broker.len("orders"), 2);
    let row = outbox.row(&bad).unwrap();
    assert_eq!((row.status, row.attempts), (RowStatus::Pending, 1));
    assert!(
        row.last_error
            .as_deref()
            .unwrap()
            .starts_with("Connection: ")
            && row.last_error.as_deref().unwrap().contains("injected"),
        "{row:?}"
    );
    assert_eq!(row.due_in, Some(Duration::from_secs(2)));

    // Not due yet: a pass does not touch it, even with the broker back.
    broker.fail_publishes_to("payments", false);
    assert_eq!(relay.flush().await.unwrap().attempted(), 0);
    tokio::time::advance(Duration::from_millis(1999)).await;
    assert_eq!(relay.flush().await.unwrap().attempted(), 0);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(relay.flush().await.unwrap().published, 1);
    assert_eq!(broker.len("payments"), 1);
    assert_eq!(outbox.row(&bad).unwrap().status, RowStatus::Published);
}

#[tokio::test(start_paused = true)]
async fn the_backoff_grows_and_is_capped() {
    let outbox = MemoryOutbox::new();
    let broker = MemoryTransport::new();
    broker.fail_publishes_to("orders", true);
    let id = Outbox::new(&outbox)
        .write(&envelope("orders", 1))
        .await
        .unwrap();
    let relay = OutboxRelay::builder(broker.clone(), outbox.clone())
        .backoff(backoff(0.5, 3.0))
        .build()
        .unwrap();
    let mut delays = Vec::new();
    for _ in 0..5 {
        assert_eq!(relay.flush().await.unwrap().failed, 1);
        let due = outbox.row(&id).unwrap().due_in.unwrap();
        delays.push(due.as_secs_f64());
        tokio::time::advance(due).await;
    }
    assert_eq!(delays, [0.5, 1.0, 2.0, 3.0, 3.0]);
    assert_eq!(outbox.row(&id).unwrap().attempts, 5);
    assert_eq!(relay.backoff_for(1), Duration::from_millis(500));
    assert_eq!(relay.backoff_for(u32::MAX), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn a_row_is_parked_once_its_attempts_run_out() {
    let outbox = MemoryOutbox::new();
    let broker = MemoryTransport::new();
    broker.fail_publishes_to("orders", true);
    let id = Outbox::new(&outbox)
        .write(&envelope("orders", 1))
        .await
        .unwrap();
    let relay = OutboxRelay::builder(broker.clone(), outbox.clone())
        .backoff(backoff(1.0, 1.0))
        .max_attempts(3)
        .build()
        .unwrap();
    let mut parked = 0;
    for _ in 0..3 {
        parked += relay.flush().await.unwrap().parked;
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(parked, 1);
    let row = outbox.row(&id).unwrap();
    assert_eq!(
        (row.status, row.attempts, row.due_in),
        (RowStatus::Parked, 3, None)
    );
    broker.fail_publishes_to("orders", false);
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(relay.drain().await.unwrap().attempted(), 0);
    assert!(broker.is_empty("orders"));
}

#[tokio::test]
async fn drain_runs_passes_until_empty_and_stops_when_only_failing_rows_remain() {
    let outbox = MemoryOutbox::new();
    let broker = MemoryTransport::new();
    for n in 0..10 {
        Outbox::new(&outbox)
            .write(&envelope("orders", n))
            .await
            .unwrap();
    }
    let relay = OutboxRelay::builder(broker.clone(), outbox.clone())
        .batch_size(3)
        .build()
        .unwrap();
    let report = relay.drain().await.unwrap();
    assert_eq!((report.published, report.passes), (10, 4));
    assert_eq!(broker.len("orders"), 10);

    broker.fail_publishes_to("orders", true);
    for n in 0..5 {
        Outbox::new(&outbox)
            .write(&envelope("orders", n))
            .await
            .unwrap();
    }
    let relay = OutboxRelay::builder(broker.clone(), outbox.clone())
        .batch_size(100)
        .build()
        .unwrap();
    let report = relay.drain().await.unwrap();
    assert_eq!((report.published, report.failed, report.passes), (0, 5, 1));
}

#[tokio::test]
async fn drain_honours_max_passes() {
    let outbox = MemoryOutbox::new();
    for n in 0..10 {
        Outbox::new(&outbox)
            .write(&envelope("orders", n))
            .await
            .unwrap();
    }
    let relay = OutboxRelay::builder(MemoryTransport::new(), outbox.clone())
        .batch_size(2)
        .max_passes(3)
        .build()
        .unwrap();
    let report = relay.drain().await.unwrap();
    assert_eq!((report.published, report.passes), (6, 3));
    assert_eq!(outbox.pending_count(), 4);
}

/// A transport that counts every publish per body and can hang on one queue.
#[derive(Debug, Default)]
struct Counting {
    published: Mutex<HashMap<Vec<u8>, usize>>,
    hang_on: Option<String>,
    delay: Duration,
}

#[async_trait]
impl Transport for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        if self.hang_on.as_deref() == Some(queue) {
            std::future::pending::<()>().await;
        }
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        *self
            .published
            .lock()
            .unwrap()
            .entry(body.to_vec())
            .or_default() += 1;
        Ok(())
    }
    async fn pop(&self, _: &str, _: Duration) -> Result<Option<Delivery>, TransportError> {
        Ok(None)
    }
    async fn ack(&self, _: &Delivery) -> Result<(), TransportError> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_at_once_publish_every_row_exactly_once() {
    let outbox = MemoryOutbox::new();
    let mut bodies = Vec::new();
    for n in 0..200 {
        let env = envelope("orders", n);
        bodies.push(env.encode().unwrap().into_bytes());
        Outbox::new(&outbox).write(&env).await.unwrap();
    }
    let counting = Arc::new(Counting {
        delay: Duration::from_micros(200),
        ..Counting::default()
    });
    let relays: Vec<OutboxRelay> = (0..2)
        .map(|_| {
            OutboxRelay::builder_arc(counting.clone(), Arc::new(outbox.clone()))
                .batch_size(10)
                .build()
                .unwrap()
        })
        .collect();
    let (a, b) = tokio::join!(relays[0].drain(), relays[1].drain());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.published + b.published, 200);
    assert!(a.published > 0 && b.published > 0, "{a:?} {b:?}");
    let published = counting.published.lock().unwrap();
    assert_eq!(published.len(), 200);
    for body in &bodies {
        assert_eq!(published.get(body), Some(&1));
    }
}

#[tokio::test(start_paused = true)]
async fn a_publish_that_hangs_times_out_and_the_batch_goes_on() {
    let outbox = MemoryOutbox::new();
    let writer = Outbox::new(&outbox);
    let stuck = writer.write(&envelope("stuck", 1)).await.unwrap();
    writer.write(&envelope("orders", 2)).await.unwrap();
    let counting = Arc::new(Counting {
        hang_on: Some("stuck".into()),
        ..Counting::default()
    });
    let relay = OutboxRelay::builder_arc(counting.clone(), Arc::new(outbox.clone()))
        .publish_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let report = relay.flush().await.unwrap();
    assert_eq!((report.published, report.failed), (1, 1));
    let row = outbox.row(&stuck).unwrap();
    assert!(
        row.last_error.unwrap().starts_with("Timeout: "),
        "a hung publish is recorded as a timeout"
    );
    assert_eq!(counting.published.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_transport_without_headers_gets_a_plain_publish() {
    let outbox = MemoryOutbox::new();
    let mut headers = Headers::new();
    headers.insert("traceparent".into(), "00-a-b-01".into());
    let env = envelope("orders", 1);
    Outbox::new(&outbox)
        .write_with_headers(&env, &headers)
        .await
        .unwrap();
    let counting = Arc::new(Counting::default());
    let relay = OutboxRelay::builder_arc(counting.clone(), Arc::new(outbox.clone()))
        .build()
        .unwrap();
    assert_eq!(relay.drain().await.unwrap().published, 1);
    assert_eq!(
        counting
            .published
            .lock()
            .unwrap()
            .get(env.encode().unwrap().as_bytes()),
        Some(&1)
    );
}

#[tokio::test]
async fn a_dropped_batch_releases_its_rows_and_a_claim_skips_held_rows() {
    let outbox = MemoryOutbox::new();
    for n in 0..4 {
        Outbox::new(&outbox)
            .write(&envelope("orders", n))
            .await
            .unwrap();
    }
    let first = outbox.claim(3).await.unwrap();
    let second = outbox.claim(3).await.unwrap();
    let ids = |b: &dyn ClaimedBatch| -> Vec<String> {
        b.records().iter().map(|r| r.id().to_string()).collect()
    };
    assert_eq!(ids(&*first), ["1", "2", "3"]);
    assert_eq!(ids(&*second), ["4"], "held rows are skipped");
    drop(first);
    let third = outbox.claim(10).await.unwrap();
    assert_eq!(ids(&*third), ["1", "2", "3"]);
    assert_eq!(outbox.claim(0).await.unwrap().records().len(), 0);

    // A settlement naming a row of another batch records nothing.
    let mut settlement = Settlement::new();
    settlement.published(OutboxId::from(1));
    settlement.published(OutboxId::from(4));
    let err = third.settle(settlement).await.unwrap_err();
    assert!(err.to_string().contains("row 4"), "{err}");
    assert_eq!(outbox.count(RowStatus::Published), 0);
    assert!(
        outbox
            .rows()
            .iter()
            .all(|r| !r.claimed || r.id.as_str() == "4")
    );
}

#[tokio::test(start_paused = true)]
async fn run_relays_new_rows_until_shut_down() {
    let outbox = MemoryOutbox::new();
    let broker = MemoryTransport::new();
    let relay = OutboxRelay::builder(broker.clone(), outbox.clone())
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        relay
            .run(async {
                let _ = stop_rx.await;
            })
            .await
    });
    for n in 0..3 {
        Outbox::new(&outbox)
            .write(&envelope("orders", n))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(broker.len("orders"), usize::try_from(n + 1).unwrap());
    }
    stop_tx.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.published, 3);
}

#[test]
fn the_builder_refuses_what_cannot_work() {
    type Tweak = fn(RelayBuilder) -> RelayBuilder;
    let build = |f: Tweak| {
        f(OutboxRelay::builder(
            MemoryTransport::new(),
            MemoryOutbox::new(),
        ))
        .build()
        .map(|_| ())
    };
    assert!(build(|b| b).is_ok());
    let cases: [(Tweak, &str); 5] = [
        (|b| b.batch_size(0), "batch_size must be at least 1"),
        (|b| b.backoff(backoff(1.0, 0.0)), "must be bounded"),
        (|b| b.backoff(backoff(f64::NAN, 1.0)), "finite"),
        (|b| b.publish_timeout(Duration::ZERO), "publish_timeout"),
        (|b| b.max_passes(0), "max_passes"),
    ];
    for (f, why) in cases {
        let err = build(f).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(err.to_string().contains(why), "{err}");
    }
}

#[tokio::test]
async fn writers_are_object_safe_and_usable_by_reference() {
    let outbox = MemoryOutbox::new();
    let tx = outbox.transaction();
    let writers: Vec<&dyn OutboxWriter> = vec![&outbox, &tx];
    for w in writers {
        Outbox::new(w).write(&envelope("q", 1)).await.unwrap();
    }
    tx.commit();
    assert_eq!(outbox.pending_count(), 2);
    let store: Arc<dyn OutboxStore> = Arc::new(outbox);
    assert_eq!(store.claim(10).await.unwrap().records().len(), 2);
}

/// A transport with a batch publish that records each call's size and can fail the next one.
#[derive(Debug, Default)]
struct Batching {
    memory: MemoryTransport,
    calls: Mutex<Vec<(String, usize)>>,
    singles: Mutex<usize>,
    fail_next_batch: Mutex<bool>,
}

#[async_trait]
impl Transport for Batching {
    fn name(&self) -> &'static str {
        "batching"
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        *self.singles.lock().unwrap() += 1;
        self.memory.publish(queue, body).await
    }
    async fn pop(&self, _: &str, _: Duration) -> Result<Option<Delivery>, TransportError> {
        Ok(None)
    }
    async fn ack(&self, _: &Delivery) -> Result<(), TransportError> {
        Ok(())
    }
    fn capabilities(&self) -> babelqueue_core::Capabilities<'_> {
        babelqueue_core::Capabilities::none()
            .sends(babelqueue_core::Sends::body_only())
            .batch_publish(self)
    }
}

#[async_trait]
impl babelqueue_core::BatchPublisher for Batching {
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        self.calls
            .lock()
            .unwrap()
            .push((queue.to_owned(), bodies.len()));
        if std::mem::take(&mut *self.fail_next_batch.lock().unwrap()) {
            return Err(TransportError::connection("the broker went away"));
        }
        for body in bodies {
            self.memory.publish(queue, body).await?;
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn runs_of_one_queue_go_out_as_one_batch_call_in_order_and_a_failed_call_fails_each_row() {
    let outbox = MemoryOutbox::new();
    let mut expected = Vec::new();
    for (n, queue) in ["orders", "orders", "orders", "payments", "orders", "orders"]
        .iter()
        .enumerate()
    {
        let env = envelope(queue, u32::try_from(n).unwrap());
        if *queue == "orders" {
            expected.push(env.encode().unwrap().into_bytes());
        }
        Outbox::new(&outbox).write(&env).await.unwrap();
    }
    let batching = Arc::new(Batching::default());
    let relay = OutboxRelay::builder_arc(batching.clone(), Arc::new(outbox.clone()))
        .backoff(backoff(1.0, 60.0))
        .build()
        .unwrap();
    // The first run of "orders" fails as a whole; the lone "payments" row goes one by one.
    *batching.fail_next_batch.lock().unwrap() = true;
    let report = relay.flush().await.unwrap();
    assert_eq!((report.published, report.failed), (3, 3), "{report:?}");
    assert_eq!(
        *batching.calls.lock().unwrap(),
        vec![("orders".to_owned(), 3), ("orders".to_owned(), 2)]
    );
    assert_eq!(*batching.singles.lock().unwrap(), 1);
    assert_eq!(outbox.pending_count(), 3, "the failed run stays pending");

    tokio::time::advance(Duration::from_secs(1)).await;
    let report = relay.drain().await.unwrap();
    assert_eq!((report.published, report.failed), (3, 0));
    assert_eq!(outbox.pending_count(), 0);
    // Every "orders" row reached the queue; the retried run after the others.
    let mut bodies = batching.memory.bodies("orders");
    assert_eq!(bodies.len(), 5);
    bodies.sort();
    expected.sort();
    assert_eq!(bodies, expected);
}
