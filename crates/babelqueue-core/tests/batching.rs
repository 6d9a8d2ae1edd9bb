//! The batch-native consume loop on `memory://`: receive several deliveries per call
//! (`prefetch`), gather acknowledgements for a transport that takes them together, publish many
//! envelopes in one step; nothing lost, nothing held back while idle, nothing stranded at stop.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{
    App, BatchAcker, BatchPublisher, Capabilities, Consume, Context, Delivery, HandlerError,
    HoldChecker, MemoryTransport, Redelivery, Transport, TransportError,
};
use babelqueue_envelope::{Envelope, RawJson};

const URN: &str = "urn:babel:orders:created";

/// memory:// behind a wrapper that records what the runtime asked of it.
#[derive(Debug)]
struct Recording {
    inner: MemoryTransport,
    /// Offer the batch capabilities (else the runtime must fall back to one call each).
    batches: bool,
    receives: Mutex<Vec<usize>>,
    /// Deliveries still unsettled at each receive.
    unsettled_at_receive: Mutex<Vec<usize>>,
    acks: Mutex<usize>,
    ack_batches: Mutex<Vec<usize>>,
    publishes: Mutex<usize>,
    publish_batches: Mutex<Vec<usize>>,
    /// Deliveries per handler slot this transport asks the runtime to hold (none: the default).
    per_slot: Option<usize>,
    /// What each `prepare_consume` announced.
    prepared: Mutex<Vec<usize>>,
}

impl Recording {
    fn new(inner: &MemoryTransport, batches: bool) -> Arc<Recording> {
        Recording::holding(inner, batches, None)
    }

    fn holding(inner: &MemoryTransport, batches: bool, per_slot: Option<usize>) -> Arc<Recording> {
        Arc::new(Recording {
            inner: inner.clone(),
            batches,
            per_slot,
            prepared: Mutex::default(),
            receives: Mutex::default(),
            unsettled_at_receive: Mutex::default(),
            acks: Mutex::default(),
            ack_batches: Mutex::default(),
            publishes: Mutex::default(),
            publish_batches: Mutex::default(),
        })
    }
}

#[async_trait]
impl Transport for Recording {
    fn name(&self) -> &'static str {
        "recording-memory"
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        *self.publishes.lock().unwrap() += 1;
        self.inner.publish(queue, body).await
    }
    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        self.inner.pop(queue, timeout).await
    }
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        self.receives.lock().unwrap().push(max);
        self.unsettled_at_receive
            .lock()
            .unwrap()
            .push(self.inner.in_flight());
        self.inner.receive(queue, max, timeout).await
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        *self.acks.lock().unwrap() += 1;
        self.inner.ack(delivery).await
    }
    async fn prepare_consume(&self, _queue: &str, held: usize) -> Result<(), TransportError> {
        self.prepared.lock().unwrap().push(held);
        Ok(())
    }
    fn capabilities(&self) -> Capabilities<'_> {
        let mut own = Capabilities::none()
            .redelivery(Redelivery::Native(&self.inner))
            .rewind(&self.inner);
        if let Some(n) = self.per_slot {
            own = own.prefetch_per_slot(n);
        }
        if self.batches {
            own.batch_ack(self).batch_publish(self)
        } else {
            own
        }
    }
}

#[async_trait]
impl BatchAcker for Recording {
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError> {
        self.ack_batches.lock().unwrap().push(deliveries.len());
        self.inner.ack_batch(deliveries).await
    }
}

#[async_trait]
impl BatchPublisher for Recording {
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        self.publish_batches.lock().unwrap().push(bodies.len());
        self.inner.publish_batch(queue, bodies).await
    }
}

/// The app of `builder`, with its own prefetch when one is given (else the transport's default).
fn build(builder: babelqueue_core::AppBuilder, prefetch: Option<usize>) -> App {
    match prefetch {
        Some(n) => builder.prefetch(n),
        None => builder,
    }
    .build()
    .unwrap()
}

fn envelopes(n: usize) -> Vec<Envelope> {
    (0..n)
        .map(|i| {
            Envelope::builder(URN)
                .queue("orders")
                .data(&serde_json::json!({ "n": i }))
                .build()
                .unwrap()
        })
        .collect()
}

/// The `n` of every message a handler saw.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<i64>>>);

impl Seen {
    fn record(&self, ctx: &Context) {
        let data: serde_json::Value = ctx.data_as().unwrap();
        self.0.lock().unwrap().push(data["n"].as_i64().unwrap());
    }
    fn all(&self) -> Vec<i64> {
        self.0.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn publish_batch_takes_one_step_where_offered_and_one_call_each_elsewhere() {
    for batches in [true, false] {
        let memory = MemoryTransport::new();
        let recording = Recording::new(&memory, batches);
        let app = App::builder_arc(recording.clone())
            .queue("orders")
            .build()
            .unwrap();
        app.publish_batch("orders", &envelopes(5)).await.unwrap();
        assert_eq!(memory.len("orders"), 5);
        if batches {
            assert_eq!(*recording.publish_batches.lock().unwrap(), vec![5]);
            assert_eq!(*recording.publishes.lock().unwrap(), 0);
        } else {
            assert!(recording.publish_batches.lock().unwrap().is_empty());
            assert_eq!(*recording.publishes.lock().unwrap(), 5);
        }
        // In order.
        for (body, n) in memory.bodies("orders").iter().zip(0..) {
            let decoded = Envelope::decode(body).unwrap().envelope;
            assert_eq!(decoded.data().unwrap().as_str(), format!(r#"{{"n":{n}}}"#));
        }

        // An envelope that cannot be encoded fails the call before anything is sent.
        let mut bad = envelopes(3);
        bad[2].set("timestamp", RawJson::integer(1));
        let error = app.publish_batch("other", &bad).await.unwrap_err();
        assert!(error.to_string().contains("timestamp"), "{error}");
        assert_eq!(memory.len("other"), 0);
    }
}

#[tokio::test]
async fn acknowledgements_are_gathered_and_sent_before_the_loop_waits() {
    let memory = MemoryTransport::new();
    let recording = Recording::new(&memory, true);
    let seen = Seen::default();
    let s = seen.clone();
    let app = App::builder_arc(recording.clone())
        .queue("orders")
        .poll_timeout(Duration::from_millis(20))
        .prefetch(16)
        .handle(URN, move |ctx: Context| {
            s.record(&ctx);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    app.publish_batch("orders", &envelopes(100)).await.unwrap();
    let consuming = tokio::spawn({
        let app = app.clone();
        async move {
            app.consume(
                Consume::new()
                    .idle_timeout(Duration::from_millis(600))
                    .handle_signals(false),
            )
            .await
        }
    });
    // All handled, and the loop is now waiting on an empty queue: nothing may be held back.
    while seen.all().len() < 100 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !consuming.is_finished(),
        "the loop is still waiting for more"
    );
    assert_eq!(memory.in_flight(), 0, "an acknowledgement was held back");
    let summary = consuming.await.unwrap().unwrap();
    assert_eq!(summary.processed, 100);
    assert_eq!(
        seen.all(),
        (0..100).collect::<Vec<_>>(),
        "in order, once each"
    );

    let batches = recording.ack_batches.lock().unwrap().clone();
    assert_eq!(batches.iter().sum::<usize>(), 100, "{batches:?}");
    assert!(
        batches.iter().any(|&n| n > 1),
        "never gathered: {batches:?}"
    );
    assert!(batches.iter().all(|&n| n <= 16), "{batches:?}");
    assert_eq!(*recording.acks.lock().unwrap(), 0, "no single ack");
}

#[tokio::test]
async fn every_acknowledgement_is_sent_before_the_next_receive() {
    // A broker that orders by group (SQS FIFO) holds the next message back while one is
    // unsettled: the loop must not ask for more with acknowledgements still gathered.
    for prefetch in [1, 4] {
        let memory = MemoryTransport::new();
        let recording = Recording::new(&memory, true);
        let app = App::builder_arc(recording.clone())
            .queue("orders")
            .poll_timeout(Duration::from_millis(20))
            .prefetch(prefetch)
            .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
            .build()
            .unwrap();
        app.publish_batch("orders", &envelopes(30)).await.unwrap();
        let summary = app
            .consume(Consume::new().max_messages(30).handle_signals(false))
            .await
            .unwrap();
        assert_eq!(summary.processed, 30);
        let unsettled = recording.unsettled_at_receive.lock().unwrap().clone();
        assert!(
            unsettled.iter().all(|&n| n == 0),
            "prefetch {prefetch}: deliveries unsettled at a receive: {unsettled:?}"
        );
    }
}

#[tokio::test]
async fn without_a_batch_acker_each_delivery_is_acknowledged_alone() {
    let memory = MemoryTransport::new();
    let recording = Recording::new(&memory, false);
    let app = App::builder_arc(recording.clone())
        .queue("orders")
        .poll_timeout(Duration::from_millis(20))
        .concurrency(4)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    app.publish_batch("orders", &envelopes(20)).await.unwrap();
    let summary = app
        .consume(Consume::new().max_messages(20).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 20);
    assert_eq!(*recording.acks.lock().unwrap(), 20);
    assert_eq!(memory.in_flight(), 0);
}

#[tokio::test]
async fn the_loop_asks_for_its_free_room_and_never_more_than_prefetch() {
    let memory = MemoryTransport::new();
    let recording = Recording::new(&memory, true);
    let app = App::builder_arc(recording.clone())
        .queue("orders")
        .poll_timeout(Duration::from_millis(20))
        .concurrency(2)
        .prefetch(6)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    app.publish_batch("orders", &envelopes(30)).await.unwrap();
    let summary = app
        .consume(Consume::new().max_messages(25).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 25);
    let receives = recording.receives.lock().unwrap().clone();
    assert_eq!(receives.first(), Some(&6), "{receives:?}");
    assert!(
        receives.iter().all(|&n| (1..=6).contains(&n)),
        "{receives:?}"
    );
    // max_messages is never overshot: the last receives ask for what is left.
    assert_eq!(memory.len("orders"), 5);
    assert_eq!(memory.in_flight(), 0);

    // A prefetch below the concurrency is raised to it.
    let low = App::builder(memory.clone())
        .concurrency(4)
        .prefetch(1)
        .build()
        .unwrap();
    assert!(format!("{low:?}").contains("prefetch: 4"), "{low:?}");
}

/// A transport may ask for several deliveries per handler slot: the default prefetch is
/// `concurrency × n`, announced to `prepare_consume`, and asked for in a receive once handlers
/// are seen to finish at once (the first receive asks for the free slots only). The app's own
/// `prefetch` wins and is asked for from the first receive; the loop still settles everything.
#[tokio::test]
async fn a_transport_may_hold_several_deliveries_per_slot_by_default() {
    let cases: [(Option<usize>, Option<usize>, usize, usize); 5] = [
        // (per slot, app prefetch, concurrency, the prefetch held)
        (None, None, 3, 3),
        (Some(4), None, 3, 12),
        (Some(4), Some(5), 3, 5),
        (Some(4), Some(1), 3, 3),
        (Some(0), None, 2, 2),
    ];
    for (per_slot, prefetch, concurrency, held) in cases {
        let memory = MemoryTransport::new();
        let recording = Recording::holding(&memory, true, per_slot);
        let builder = App::builder_arc(recording.clone())
            .queue("orders")
            .poll_timeout(Duration::from_millis(20))
            .concurrency(concurrency)
            .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) });
        let app = build(builder, prefetch);
        let case =
            format!("per slot {per_slot:?}, prefetch {prefetch:?}, concurrency {concurrency}");
        assert!(
            format!("{app:?}").contains(&format!("prefetch: {held}")),
            "{case}: {app:?}"
        );
        app.publish_batch("orders", &envelopes(40)).await.unwrap();
        let summary = app
            .consume(Consume::new().max_messages(40).handle_signals(false))
            .await
            .unwrap();
        assert_eq!(summary.processed, 40, "{case}");
        assert_eq!(*recording.prepared.lock().unwrap(), [held], "{case}");
        let receives = recording.receives.lock().unwrap().clone();
        let first = if prefetch.is_none() {
            concurrency
        } else {
            held
        };
        assert_eq!(receives.first(), Some(&first), "{case}: {receives:?}");
        assert!(receives.contains(&held), "{case}: {receives:?}");
        assert!(receives.iter().all(|&n| n <= held), "{case}: {receives:?}");
        assert_eq!(memory.len("orders"), 0, "{case}");
        assert_eq!(memory.in_flight(), 0, "{case}");
    }
}

/// A handler that waits (here on a timer) finishes after its first poll: with the transport's
/// per-slot prefetch the loop then asks only for what fills its free slots, so no delivery
/// waits behind a slow handler while its broker lock (a reservation, a visibility timeout)
/// runs. The app's own prefetch is held whatever the handlers do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_slot_prefetch_is_not_held_behind_handlers_that_wait() {
    for (concurrency, prefetch, most) in [(2, None, 2), (1, None, 1), (2, Some(6), 6)] {
        let memory = MemoryTransport::new();
        let recording = Recording::holding(&memory, true, Some(4));
        let builder = App::builder_arc(recording.clone())
            .queue("orders")
            .poll_timeout(Duration::from_millis(20))
            .concurrency(concurrency)
            .handle(URN, |_ctx: Context| async {
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok::<(), HandlerError>(())
            });
        let app = build(builder, prefetch);
        let case = format!("concurrency {concurrency}, prefetch {prefetch:?}");
        app.publish_batch("orders", &envelopes(24)).await.unwrap();
        let summary = app
            .consume(Consume::new().max_messages(24).handle_signals(false))
            .await
            .unwrap();
        assert_eq!(summary.processed, 24, "{case}");
        // Announced as the transport asked (RabbitMQ's consumer keeps its prefetch).
        assert_eq!(
            *recording.prepared.lock().unwrap(),
            [prefetch.unwrap_or(concurrency * 4)],
            "{case}"
        );
        let receives = recording.receives.lock().unwrap().clone();
        assert!(receives.iter().all(|&n| n <= most), "{case}: {receives:?}");
        assert!(receives.contains(&most), "{case}: {receives:?}");
        assert_eq!((memory.len("orders"), memory.in_flight()), (0, 0), "{case}");
    }
}

#[tokio::test]
async fn deliveries_received_and_not_started_go_back_at_a_stop() {
    let memory = MemoryTransport::new();
    let stopped = Arc::new(AtomicBool::new(false));
    // The handler needs the app's stop handle; it is shared through a slot filled once built.
    let handle: Arc<Mutex<Option<babelqueue_core::StopHandle>>> = Arc::default();
    let app = {
        let handle = handle.clone();
        let stopped = stopped.clone();
        App::builder(memory.clone())
            .queue("orders")
            .poll_timeout(Duration::from_millis(20))
            .prefetch(5)
            .handle(URN, move |_ctx: Context| {
                // The first handler asks the loop to stop while four more wait for its slot.
                if !stopped.swap(true, Ordering::SeqCst)
                    && let Some(stop) = handle.lock().unwrap().as_ref()
                {
                    stop.stop();
                }
                async { Ok::<(), HandlerError>(()) }
            })
            .build()
            .unwrap()
    };
    *handle.lock().unwrap() = Some(app.stop_handle());
    app.publish_batch("orders", &envelopes(10)).await.unwrap();
    let summary = app
        .consume(Consume::new().handle_signals(false))
        .await
        .unwrap();
    // One handled; the four received with it went back unchanged; none is stranded.
    assert_eq!(summary.processed, 1, "{summary:?}");
    assert_eq!(summary.released_at_shutdown, 4, "{summary:?}");
    assert_eq!(memory.in_flight(), 0);
    assert_eq!(memory.len("orders"), 9);
    let mut left: BTreeSet<i64> = BTreeSet::new();
    for body in memory.bodies("orders") {
        let envelope = Envelope::decode(&body).unwrap().envelope;
        assert_eq!(envelope.attempts(), 0, "released unchanged");
        let data: serde_json::Value = envelope.data_as().unwrap();
        left.insert(data["n"].as_i64().unwrap());
    }
    assert_eq!(left, (1..10).collect());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_with_a_deep_prefetch_handles_every_message_once() {
    let memory = MemoryTransport::new();
    let seen = Seen::default();
    let s = seen.clone();
    let app = App::builder(memory.clone())
        .queue("orders")
        .poll_timeout(Duration::from_millis(20))
        .concurrency(8)
        .prefetch(32)
        .handle(URN, move |ctx: Context| {
            s.record(&ctx);
            async {
                tokio::task::yield_now().await;
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    app.publish_batch("orders", &envelopes(500)).await.unwrap();
    let summary = app
        .consume(Consume::new().max_messages(500).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 500);
    let mut all = seen.all();
    all.sort_unstable();
    assert_eq!(all, (0..500).collect::<Vec<_>>(), "each exactly once");
    assert_eq!((memory.len("orders"), memory.in_flight()), (0, 0));
}

/// memory:// where the broker has taken back every delivery whose body says so.
#[derive(Debug)]
struct TakingBack(MemoryTransport);

#[async_trait]
impl Transport for TakingBack {
    fn name(&self) -> &'static str {
        "taking-back-memory"
    }
    async fn publish(&self, queue: &str, body: &[u8]) -> Result<(), TransportError> {
        self.0.publish(queue, body).await
    }
    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        self.0.pop(queue, timeout).await
    }
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, TransportError> {
        self.0.receive(queue, max, timeout).await
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), TransportError> {
        self.0.ack(delivery).await
    }
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::none().rewind(&self.0).hold_check(self)
    }
}

impl HoldChecker for TakingBack {
    fn still_held(&self, delivery: &Delivery) -> bool {
        !String::from_utf8_lossy(delivery.body()).contains("taken back")
    }
}

/// A delivery the broker took back while it waited for a slot is not handled (the broker hands
/// it out again); the others are handled and settled as usual.
#[tokio::test]
async fn a_delivery_the_broker_took_back_is_not_started() {
    let memory = MemoryTransport::new();
    let started: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = started.clone();
    let app = App::builder(TakingBack(memory.clone()))
        .queue("orders")
        .poll_timeout(Duration::from_millis(20))
        .prefetch(4)
        .handle(URN, move |ctx: Context| {
            seen.lock().unwrap().push(ctx.data().as_str().to_owned());
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    let notes = ["kept", "taken back", "kept", "taken back", "kept"];
    let envelopes: Vec<Envelope> = notes
        .iter()
        .map(|note| {
            Envelope::builder(URN)
                .queue("orders")
                .data(&serde_json::json!({ "note": note }))
                .build()
                .unwrap()
        })
        .collect();
    app.publish_batch("orders", &envelopes).await.unwrap();
    let summary = app
        .consume(
            Consume::new()
                .idle_timeout(Duration::from_millis(200))
                .handle_signals(false),
        )
        .await
        .unwrap();
    assert_eq!(summary.processed, 3, "{summary:?}");
    let started = started.lock().unwrap().clone();
    assert_eq!(started.len(), 3, "{started:?}");
    assert!(
        started.iter().all(|data| data.contains("kept")),
        "{started:?}"
    );
    // The two taken back are the broker's again (never settled here).
    assert_eq!(memory.in_flight(), 2);
    assert_eq!(memory.len("orders"), 0);
}
