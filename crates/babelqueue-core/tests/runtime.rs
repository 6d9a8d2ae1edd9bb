//! The runtime on `memory://`: routing, retry with back-off, the unknown-URN strategies, poison,
//! a failing dead-letter queue, concurrency, idempotency, headers and the observer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::idempotency::{InMemoryStore, idempotent};
use babelqueue_core::{
    App, AppBuilder, Backoff, Consume, Context, Event, HandlerError, Headers, Jitter,
    MemoryTransport, Observer, Outcome, Transport, UnknownUrn,
};
use babelqueue_envelope::Envelope;
use serde_json::{Value, json};

const URN: &str = "urn:babel:orders:created";

fn app(memory: &MemoryTransport) -> AppBuilder {
    App::builder(memory.clone())
        .queue("orders")
        .poll_timeout(Duration::from_millis(20))
        .rewind_pause(Duration::from_millis(20))
}

fn drain() -> Consume {
    Consume::new().max_messages(1000).handle_signals(false)
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).expect("JSON")
}

/// Counts handler calls and records each call's (attempts, tokio instant).
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<(i64, tokio::time::Instant)>>>);

impl Calls {
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn attempts(&self) -> Vec<i64> {
        self.0.lock().unwrap().iter().map(|(a, _)| *a).collect()
    }
    fn record(&self, ctx: &Context) {
        self.0
            .lock()
            .unwrap()
            .push((ctx.attempts(), tokio::time::Instant::now()));
    }
}

#[tokio::test]
async fn publish_consume_ack() {
    let memory = MemoryTransport::new();
    let calls = Calls::default();
    let c = calls.clone();
    let seen = Arc::new(Mutex::new(Value::Null));
    let s = seen.clone();
    let app = app(&memory)
        .handle(URN, move |ctx: Context| {
            let (c, s) = (c.clone(), s.clone());
            async move {
                c.record(&ctx);
                *s.lock().unwrap() = json!({"data": ctx.data_as::<Value>()?, "queue": ctx.queue(), "urn": ctx.urn()});
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let id = app.publish(URN, &json!({"order_id": 1042})).await.unwrap();
    let body = memory.bodies("orders").remove(0);
    let on_wire = json_of(&body);
    assert_eq!(on_wire["meta"]["id"], Value::from(id));
    assert_eq!(on_wire["meta"]["lang"], "rust");
    let summary = app.consume(drain()).await.unwrap();
    assert_eq!(summary.processed, 1);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        *seen.lock().unwrap(),
        json!({"data": {"order_id": 1042}, "queue": "orders", "urn": URN})
    );
    assert_eq!((memory.len("orders"), memory.in_flight()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn retry_with_exponential_back_off_then_success() {
    let memory = MemoryTransport::new();
    let calls = Calls::default();
    let c = calls.clone();
    let app = app(&memory)
        .max_attempts(5)
        .backoff(Backoff {
            base: 0.2,
            multiplier: 2.0,
            max: 0.0,
            jitter: Jitter::None,
        })
        .handle(URN, move |ctx: Context| {
            let c = c.clone();
            async move {
                c.record(&ctx);
                if ctx.attempts() < 2 {
                    Err(HandlerError::new("not yet"))
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    app.publish(URN, &json!({})).await.unwrap();
    let summary = app
        .consume(
            Consume::new()
                .idle_timeout(Duration::from_secs(5))
                .handle_signals(false),
        )
        .await
        .unwrap();
    assert_eq!(summary.processed, 3);
    assert_eq!(calls.attempts(), [0, 1, 2]);
    let times: Vec<_> = calls.0.lock().unwrap().iter().map(|(_, t)| *t).collect();
    // d(1) = 0.2 s, d(2) = 0.4 s: each redelivery waited at least its back-off.
    assert!(
        times[1] - times[0] >= Duration::from_millis(200),
        "{:?}",
        times[1] - times[0]
    );
    assert!(
        times[2] - times[1] >= Duration::from_millis(400),
        "{:?}",
        times[2] - times[1]
    );
    assert!(times[2] - times[1] < Duration::from_millis(600));
    assert!(memory.is_empty("orders") && memory.is_empty("orders.dlq"));
}

#[tokio::test]
async fn retries_exhausted_dead_letter_carries_the_failure() {
    let memory = MemoryTransport::new();
    let calls = Calls::default();
    let c = calls.clone();
    let app = app(&memory)
        .max_attempts(2)
        .dead_letter(true)
        .handle(URN, move |ctx: Context| {
            let c = c.clone();
            async move {
                c.record(&ctx);
                Err::<(), _>(HandlerError::new("boom").with_exception("RuntimeError"))
            }
        })
        .build()
        .unwrap();
    let envelope = app
        .envelope(URN)
        .meta("ext", &json!({"acme": 1}))
        .build()
        .unwrap();
    app.publish_envelope("orders", &envelope, &Headers::new())
        .await
        .unwrap();
    app.consume(drain()).await.unwrap();
    assert_eq!(calls.attempts(), [0, 1]);
    let dlq = memory.bodies("orders.dlq");
    assert_eq!(dlq.len(), 1);
    let record = json_of(&dlq[0]);
    assert_eq!(record["attempts"], 2);
    assert_eq!(record["meta"]["ext"], json!({"acme": 1}));
    let block = &record["dead_letter"];
    assert_eq!(
        (
            block["reason"].as_str(),
            block["error"].as_str(),
            block["exception"].as_str()
        ),
        (Some("failed"), Some("boom"), Some("RuntimeError"))
    );
    assert_eq!(
        (
            block["original_queue"].as_str(),
            block["attempts"].as_i64(),
            block["lang"].as_str()
        ),
        (Some("orders"), Some(2), Some("rust"))
    );
}

#[tokio::test]
async fn without_a_dead_letter_queue_exhausted_messages_are_dropped_loudly() {
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .handle(URN, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("boom"))
        })
        .build()
        .unwrap();
    app.publish(URN, &json!({})).await.unwrap();
    let summary = app.consume(drain()).await.unwrap();
    assert_eq!(summary.processed, 3);
    assert!(memory.is_empty("orders") && memory.is_empty("orders.dlq"));
}

async fn unknown_urn_run(strategy: UnknownUrn, dead_letter: bool) -> (MemoryTransport, Vec<u8>) {
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .on_unknown_urn(strategy)
        .dead_letter(dead_letter)
        .build()
        .unwrap();
    let envelope = app.envelope("urn:nobody:handles:this").build().unwrap();
    let body = envelope.encode().unwrap().into_bytes();
    memory.publish("orders", &body).await.unwrap();
    let limit = if strategy == UnknownUrn::Release {
        2
    } else {
        100
    };
    app.consume(Consume::new().max_messages(limit).handle_signals(false))
        .await
        .unwrap();
    (memory, body)
}

#[tokio::test]
async fn unknown_urn_fail_retries_then_dead_letters_as_unknown_urn() {
    let (memory, _) = unknown_urn_run(UnknownUrn::Fail, true).await;
    let dlq = memory.bodies("orders.dlq");
    assert_eq!(dlq.len(), 1);
    let record = json_of(&dlq[0]);
    assert_eq!(record["attempts"], 3);
    assert_eq!(record["dead_letter"]["reason"], "unknown_urn");
    assert_eq!(record["dead_letter"]["exception"], "UnknownUrnError");
    assert_eq!(
        record["dead_letter"]["error"],
        "No handler mapped for URN [urn:nobody:handles:this]."
    );
}

#[tokio::test]
async fn unknown_urn_delete_acknowledges() {
    let (memory, _) = unknown_urn_run(UnknownUrn::Delete, true).await;
    assert!(memory.is_empty("orders") && memory.is_empty("orders.dlq") && memory.in_flight() == 0);
}

#[tokio::test]
async fn unknown_urn_release_gives_it_back_unchanged() {
    let (memory, body) = unknown_urn_run(UnknownUrn::Release, true).await;
    // Released twice, byte for byte, attempts never counted.
    assert_eq!(memory.bodies("orders"), vec![body]);
    assert!(memory.is_empty("orders.dlq"));
}

#[tokio::test]
async fn a_message_released_again_and_again_is_no_activity_for_the_idle_timeout() {
    let memory = MemoryTransport::new();
    let handled = Arc::new(AtomicUsize::new(0));
    let h = handled.clone();
    let first = app(&memory)
        .on_unknown_urn(UnknownUrn::Release)
        .build()
        .unwrap();
    let unknown = first.envelope("urn:nobody:handles:this").build().unwrap();
    let body = unknown.encode().unwrap().into_bytes();
    memory.publish("orders", &body).await.unwrap();
    let started = tokio::time::Instant::now();
    // Without the rule the loop releases and re-reserves the same message for ever, without
    // ever yielding: it runs on a thread of its own, so that the test can fail instead of
    // hanging.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let summary = runtime.block_on(
            first.consume(
                Consume::new()
                    .idle_timeout(Duration::from_millis(300))
                    .handle_signals(false),
            ),
        );
        let _ = done.send(summary);
    });
    let summary = finished
        .recv_timeout(Duration::from_secs(10))
        .expect("the idle timeout ends the run")
        .unwrap();
    assert!(summary.processed >= 2, "it was released more than once");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        memory.bodies("orders"),
        vec![body],
        "still there, unchanged"
    );

    // New work keeps the run alive while the unknown message cycles (given back after 50 ms
    // each time, so the others are reached): a known message at 200 ms and one at 400 ms are
    // both handled under an idle timeout of 300 ms.
    let app = app(&memory)
        .on_unknown_urn(UnknownUrn::Release)
        .unknown_urn_release_delay(Duration::from_millis(50))
        .handle("urn:babel:known", move |_ctx: Context| {
            let h = handled.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let late = tokio::spawn({
        let app = app.clone();
        async move {
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                app.publish("urn:babel:known", &json!({})).await.unwrap();
            }
        }
    });
    tokio::time::timeout(
        Duration::from_secs(10),
        app.consume(
            Consume::new()
                .idle_timeout(Duration::from_millis(300))
                .handle_signals(false),
        ),
    )
    .await
    .expect("ends")
    .unwrap();
    late.await.unwrap();
    assert_eq!(h.load(Ordering::SeqCst), 2, "both were handled");
}

#[tokio::test]
async fn unknown_urn_dead_letter_writes_at_once_even_with_dead_lettering_off() {
    let (memory, _) = unknown_urn_run(UnknownUrn::DeadLetter, false).await;
    let dlq = memory.bodies("orders.dlq");
    assert_eq!(dlq.len(), 1);
    let record = json_of(&dlq[0]);
    assert_eq!(record["attempts"], 0);
    assert_eq!(record["dead_letter"]["reason"], "unknown_urn");
    assert_eq!(record["dead_letter"]["error"], Value::Null);
    assert!(memory.is_empty("orders"));
}

const POISON: &[&[u8]] = &[
    b"not json",
    b"",
    b"[1,2]",
    b"null",
    b"{\"job\":\"urn:babel:orders:created\",\"attempts\":1.5}",
    b"{\"job\":\"urn:babel:orders:created\",\"data\":{\"n\":1e400}}",
    b"{\"data\":{}}",
    b"\xff\xfe{garbage",
    b"\xef\xbb\xbf{\"job\":\"urn:babel:orders:created\"}",
];

#[tokio::test]
async fn poison_never_reaches_a_handler_and_lands_once_in_the_dlq_with_its_bytes() {
    for strategy in [
        UnknownUrn::Fail,
        UnknownUrn::Release,
        UnknownUrn::DeadLetter,
    ] {
        for body in POISON {
            let memory = MemoryTransport::new();
            let calls = Calls::default();
            let c = calls.clone();
            let app = app(&memory)
                .dead_letter(strategy != UnknownUrn::DeadLetter)
                .on_unknown_urn(strategy)
                .handle(URN, move |ctx: Context| {
                    let c = c.clone();
                    async move {
                        c.record(&ctx);
                        Ok::<(), HandlerError>(())
                    }
                })
                .build()
                .unwrap();
            memory.publish("orders", body).await.unwrap();
            app.consume(drain()).await.unwrap();
            assert_eq!(calls.len(), 0, "{strategy}: {body:?}");
            let dlq = memory.bodies("orders.dlq");
            assert_eq!(dlq.len(), 1, "{strategy}: {body:?}");
            let text = String::from_utf8(dlq[0].clone()).expect("records are UTF-8");
            let record = babelqueue_envelope::Envelope::parse_object(text.as_bytes()).unwrap();
            let block = record.get("dead_letter").unwrap();
            assert!(
                block
                    .as_str()
                    .contains("\"reason\":\"poison\",\"error\":\"Undecodable BabelQueue body: "),
                "{block:?}"
            );
            assert!(block.as_str().contains("\"original_queue\":\"orders\""));
            // The original bytes are there: raw text, base64, or a byte-level splice.
            match record.get("raw") {
                Some(raw) if record.get("raw_encoding").is_some() => {
                    assert_eq!(
                        raw.as_str(),
                        "\"//57Z2FyYmFnZQ==\"",
                        "base64 of the exact bytes"
                    )
                }
                Some(raw) => assert_eq!(raw.as_string().unwrap().as_bytes(), *body),
                None => {
                    assert!(text.starts_with(
                        &String::from_utf8_lossy(&body[..body.len() - 1]).into_owned()
                    ))
                }
            }
            assert!(memory.is_empty("orders") && memory.in_flight() == 0);
        }
    }
}

#[tokio::test]
async fn poison_with_dead_lettering_off_is_bounded_then_dropped() {
    let memory = MemoryTransport::new();
    let app = app(&memory).build().unwrap();
    memory.publish("orders", b"not json").await.unwrap();
    let summary = app.consume(drain()).await.unwrap();
    // Delivered exactly max_attempts (3) times: the original, then {"attempts":1}, {"attempts":2}.
    assert_eq!(summary.processed, 3);
    assert!(memory.is_empty("orders") && memory.is_empty("orders.dlq"));
}

#[tokio::test]
async fn poison_under_delete_is_dropped() {
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .dead_letter(true)
        .on_unknown_urn(UnknownUrn::Delete)
        .build()
        .unwrap();
    memory.publish("orders", b"{}").await.unwrap();
    assert_eq!(app.consume(drain()).await.unwrap().processed, 1);
    assert!(memory.is_empty("orders") && memory.is_empty("orders.dlq"));
}

#[tokio::test]
async fn a_failed_dead_letter_write_leaves_the_message_unsettled_and_the_worker_running() {
    let memory = MemoryTransport::new();
    memory.fail_publishes_to("orders.dlq", true);
    let handled = Calls::default();
    let h = handled.clone();
    let app = app(&memory)
        .dead_letter(true)
        .handle(URN, move |ctx: Context| {
            let h = h.clone();
            async move {
                h.record(&ctx);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    memory
        .publish("orders", b"{\"not\":\"an envelope\"}")
        .await
        .unwrap();
    app.publish(URN, &json!({"order_id": 7})).await.unwrap();
    let worker = {
        let app = app.clone();
        tokio::spawn(async move { app.consume(Consume::new().handle_signals(false)).await })
    };
    // The valid message behind the poison one is handled while the DLQ is down.
    for _ in 0..200 {
        if handled.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(handled.len(), 1, "the worker kept running");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(memory.is_empty("orders.dlq"));
    assert_eq!(
        memory.len("orders") + memory.in_flight(),
        1,
        "the poison message is held, not lost"
    );
    // The DLQ comes back: the next attempt writes the record exactly once.
    memory.fail_publishes_to("orders.dlq", false);
    for _ in 0..200 {
        if !memory.is_empty("orders.dlq") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    app.stop_handle().stop();
    let summary = worker.await.unwrap().unwrap();
    assert!(summary.processed >= 3, "{summary:?}");
    assert_eq!(memory.bodies("orders.dlq").len(), 1);
    assert!(memory.is_empty("orders") && memory.in_flight() == 0);
    assert_eq!(handled.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_n_runs_n_handlers_at_once() {
    const N: usize = 8;
    let memory = MemoryTransport::new();
    let barrier = Arc::new(tokio::sync::Barrier::new(N));
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (b, n, p) = (barrier.clone(), now.clone(), peak.clone());
    let app = app(&memory)
        .concurrency(N)
        .handle(URN, move |_ctx: Context| {
            let (b, n, p) = (b.clone(), n.clone(), p.clone());
            async move {
                let running = n.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(running, Ordering::SeqCst);
                // Completes only when N handlers are waiting at the same time.
                tokio::time::timeout(Duration::from_secs(5), b.wait())
                    .await
                    .map_err(|_| HandlerError::new("fewer than N handlers ran at once"))?;
                n.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .build()
        .unwrap();
    for i in 0..N {
        app.publish(URN, &json!({"i": i})).await.unwrap();
    }
    let summary = app
        .consume(Consume::new().max_messages(N as u64).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, N as u64);
    assert_eq!(peak.load(Ordering::SeqCst), N);
    assert!(memory.is_empty("orders"), "no retry happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_bound_handlers_still_run_side_by_side_above_concurrency_one() {
    // A handler that computes without awaiting (here: blocks its thread for 20 ms). The
    // consume loop polls a new dispatch itself first; three long first polls in a row turn
    // that off, so the later ones are tasks and two of them run at the same time on the two
    // workers.
    const MESSAGES: usize = 12;
    let memory = MemoryTransport::new();
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (n, p) = (now.clone(), peak.clone());
    let app = app(&memory)
        .concurrency(2)
        .handle(URN, move |_ctx: Context| {
            let (n, p) = (n.clone(), p.clone());
            async move {
                p.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                n.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    for i in 0..MESSAGES {
        app.publish(URN, &json!({"i": i})).await.unwrap();
    }
    let summary = app
        .consume(
            Consume::new()
                .max_messages(MESSAGES as u64)
                .handle_signals(false),
        )
        .await
        .unwrap();
    assert_eq!(summary.processed, MESSAGES as u64);
    assert_eq!(peak.load(Ordering::SeqCst), 2, "two handlers overlapped");
    assert!(memory.is_empty("orders") && memory.in_flight() == 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_one_runs_handlers_one_at_a_time() {
    let memory = MemoryTransport::new();
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (n, p) = (now.clone(), peak.clone());
    let app = app(&memory)
        .handle(URN, move |_ctx: Context| {
            let (n, p) = (n.clone(), p.clone());
            async move {
                p.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                n.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    for _ in 0..5 {
        app.publish(URN, &json!({})).await.unwrap();
    }
    app.consume(drain()).await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_deliveries_of_one_id_run_the_handler_once() {
    let memory = MemoryTransport::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let store = Arc::new(InMemoryStore::new());
    let app = app(&memory)
        .concurrency(2)
        .handle(
            URN,
            idempotent(store, move |_ctx: Context| {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok::<(), HandlerError>(())
                }
            }),
        )
        .build()
        .unwrap();
    let body = app.envelope(URN).build().unwrap().encode().unwrap();
    memory.publish("orders", body.as_bytes()).await.unwrap();
    memory.publish("orders", body.as_bytes()).await.unwrap();
    app.consume(
        Consume::new()
            .idle_timeout(Duration::from_millis(1500))
            .handle_signals(false),
    )
    .await
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(memory.is_empty("orders") && memory.is_empty("orders.dlq"));
}

#[tokio::test]
async fn handler_outcomes_reject_and_retry_after() {
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .dead_letter(true)
        .max_attempts(10)
        .handle("urn:reject", |_ctx: Context| async {
            Err::<(), _>(HandlerError::reject("can never work"))
        })
        .handle("urn:later", |ctx: Context| async move {
            if ctx.attempts() == 0 {
                Err(HandlerError::retry_after("busy", Duration::from_millis(50)))
            } else {
                Ok(())
            }
        })
        .build()
        .unwrap();
    app.publish("urn:reject", &json!({})).await.unwrap();
    app.publish("urn:later", &json!({})).await.unwrap();
    let started = std::time::Instant::now();
    app.consume(
        Consume::new()
            .idle_timeout(Duration::from_millis(300))
            .handle_signals(false),
    )
    .await
    .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert!(memory.is_empty("orders"));
    let dlq = memory.bodies("orders.dlq");
    assert_eq!(dlq.len(), 1);
    let record = json_of(&dlq[0]);
    assert_eq!(
        (record["job"].as_str(), record["attempts"].as_i64()),
        (Some("urn:reject"), Some(1))
    );
    assert_eq!(record["dead_letter"]["reason"], "poison");
}

#[tokio::test]
async fn a_panicking_handler_is_a_failure_not_a_crash() {
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .max_attempts(1)
        .dead_letter(true)
        .handle(URN, |_ctx: Context| async { panic!("kaboom") })
        .build()
        .unwrap();
    app.publish(URN, &json!({})).await.unwrap();
    app.consume(drain()).await.unwrap();
    let record = json_of(&memory.bodies("orders.dlq")[0]);
    assert_eq!(
        record["dead_letter"]["error"],
        "the handler panicked: kaboom"
    );
}

#[tokio::test]
async fn headers_reach_the_handler_and_never_the_envelope() {
    let memory = MemoryTransport::new();
    let seen = Arc::new(Mutex::new((Headers::new(), false)));
    let s = seen.clone();
    let app = app(&memory)
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                *s.lock().unwrap() = (ctx.headers().clone(), ctx.is_replay());
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let headers = Headers::from([
        (
            "traceparent".to_owned(),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
        ),
        ("bq-replay-bypass".to_owned(), "1".to_owned()),
    ]);
    let envelope = app.envelope(URN).build().unwrap();
    app.publish_envelope("orders", &envelope, &headers)
        .await
        .unwrap();
    assert!(
        !String::from_utf8(memory.bodies("orders")[0].clone())
            .unwrap()
            .contains("traceparent")
    );
    app.consume(drain()).await.unwrap();
    let (got, replay) = seen.lock().unwrap().clone();
    assert_eq!((got, replay), (headers, true));
}

#[tokio::test]
async fn typed_handlers_and_the_observer() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct OrderCreated {
        order_id: u64,
    }
    impl babelqueue_envelope::Message for OrderCreated {
        const URN: &'static str = URN;
    }
    #[derive(Default)]
    struct Seen(Mutex<Vec<(String, Outcome, bool)>>);
    impl Observer for Seen {
        fn on_event(&self, e: &Event<'_>) {
            self.0.lock().unwrap().push((
                e.urn.to_owned(),
                e.outcome,
                e.handler.is_some_and(|(_, ok)| ok),
            ));
        }
    }
    let memory = MemoryTransport::new();
    let seen = Arc::new(Seen::default());
    let total = Arc::new(AtomicUsize::new(0));
    let t = total.clone();
    let app = app(&memory)
        .max_attempts(1)
        .observer(seen.clone())
        .handle_message(move |order: OrderCreated, _ctx: Context| {
            let t = t.clone();
            async move {
                t.fetch_add(usize::try_from(order.order_id).unwrap(), Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    app.publish_message(&OrderCreated { order_id: 40 })
        .await
        .unwrap();
    // data that does not fit the type fails the message
    app.publish(URN, &json!({"order_id": "forty"}))
        .await
        .unwrap();
    app.consume(drain()).await.unwrap();
    assert_eq!(total.load(Ordering::SeqCst), 40);
    let events = seen.0.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            (URN.to_owned(), Outcome::Acked, true),
            (URN.to_owned(), Outcome::Dropped, false)
        ]
    );
}

#[tokio::test]
async fn every_observer_sees_dispatches_settles_and_publishes_in_order() {
    /// What one observer saw, as lines.
    struct Log(&'static str, Arc<Mutex<Vec<String>>>);
    impl Observer for Log {
        fn on_event(&self, e: &Event<'_>) {
            self.1
                .lock()
                .unwrap()
                .push(format!("{} settled {} {:?}", self.0, e.queue, e.outcome));
        }
        fn on_dispatch(&self, queue: &str) {
            self.1
                .lock()
                .unwrap()
                .push(format!("{} dispatch {queue}", self.0));
        }
        fn on_published(&self, queue: &str, urn: &str, count: u64) {
            self.1
                .lock()
                .unwrap()
                .push(format!("{} published {queue} {urn} {count}", self.0));
        }
    }
    let memory = MemoryTransport::new();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let app = app(&memory)
        .observer(Arc::new(Log("a", lines.clone())))
        .observer(Arc::new(Log("b", lines.clone())))
        .handle(URN, |ctx: Context| async move {
            ctx.publish("urn:babel:orders:shipped", &json!({})).await?;
            Ok::<(), HandlerError>(())
        })
        .build()
        .unwrap();
    app.publish(URN, &json!({})).await.unwrap();
    app.consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    let envelopes = vec![app.envelope(URN).build().unwrap(); 2];
    app.publish_batch("invoices", &envelopes).await.unwrap();
    assert_eq!(
        *lines.lock().unwrap(),
        [
            format!("a published orders {URN} 1"),
            format!("b published orders {URN} 1"),
            "a dispatch orders".to_owned(),
            "b dispatch orders".to_owned(),
            "a published orders urn:babel:orders:shipped 1".to_owned(),
            "b published orders urn:babel:orders:shipped 1".to_owned(),
            "a settled orders Acked".to_owned(),
            "b settled orders Acked".to_owned(),
            format!("a published invoices {URN} 1"),
            format!("b published invoices {URN} 1"),
            format!("a published invoices {URN} 1"),
            format!("b published invoices {URN} 1"),
        ]
    );
}

#[tokio::test]
async fn a_stop_before_consume_returns_at_once_and_is_then_cleared() {
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    app.publish(URN, &json!({})).await.unwrap();
    app.stop_handle().stop();
    assert_eq!(app.consume(drain()).await.unwrap().processed, 0);
    assert_eq!(memory.len("orders"), 1);
    assert_eq!(app.consume(drain()).await.unwrap().processed, 1);
}

#[tokio::test]
async fn raw_releases_drop_forbidden_keys_and_keep_clean_bodies_byte_for_byte() {
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .on_unknown_urn(UnknownUrn::Release)
        .build()
        .unwrap();
    let legacy =
        br#"{"job":"urn:nobody","timestamp":5,"data":{"n":12345678901234567890},"attempts":0}"#;
    let clean = br#"{ "job" : "urn:nobody", "data":{"n":1.50}, "attempts":0 }"#;
    memory.publish("orders", legacy).await.unwrap();
    memory.publish("orders", clean).await.unwrap();
    app.consume(Consume::new().max_messages(2).handle_signals(false))
        .await
        .unwrap();
    let bodies = memory.bodies("orders");
    assert_eq!(
        bodies[0],
        br#"{"job":"urn:nobody","data":{"n":12345678901234567890},"attempts":0}"#.to_vec()
    );
    assert_eq!(bodies[1], clean.to_vec());
}

#[tokio::test]
async fn the_dlq_can_be_listed_and_redriven() {
    use babelqueue_core::redrive::{Redrive, list, redrive};
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .max_attempts(1)
        .dead_letter(true)
        .handle(URN, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("down"))
        })
        .build()
        .unwrap();
    app.publish(URN, &json!({"n": 1})).await.unwrap();
    app.publish(URN, &json!({"n": 2})).await.unwrap();
    memory.publish("orders", b"garbage").await.unwrap();
    app.consume(drain()).await.unwrap();
    assert_eq!(list(&memory, "orders.dlq", 0).await.unwrap().len(), 3);

    let dry = redrive(
        &memory,
        "orders.dlq",
        &Redrive::new().dry_run(true),
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!((dry.redriven, dry.skipped), (0, 3));
    assert_eq!(memory.len("orders.dlq"), 3);

    let mut seen = 0;
    let report = redrive(&memory, "orders.dlq", &Redrive::new(), &mut |_| seen += 1)
        .await
        .unwrap();
    assert_eq!((report.redriven, report.skipped, seen), (2, 1, 3));
    assert_eq!(report.items[0].to, "orders");
    let back: Vec<Value> = memory.bodies("orders").iter().map(|b| json_of(b)).collect();
    assert_eq!(back.len(), 2);
    assert!(
        back.iter()
            .all(|e| e["attempts"] == 0 && e.get("dead_letter").is_none())
    );
    // the poison record stays in the DLQ, byte for byte
    assert_eq!(memory.len("orders.dlq"), 1);

    // A failing publish restores everything that was drained.
    memory
        .publish("orders.dlq", &memory.bodies("orders")[0])
        .await
        .unwrap();
    memory.fail_publishes_to("elsewhere", true);
    let err = redrive(
        &memory,
        "orders.dlq",
        &Redrive::new().to_queue("elsewhere"),
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("restored"), "{err}");
    assert_eq!(memory.len("orders.dlq"), 2);
    assert_eq!(memory.in_flight(), 0);
}

#[tokio::test]
async fn configuration_mistakes_are_refused_by_name() {
    let memory = MemoryTransport::new();
    let err = App::builder(memory.clone())
        .dead_letter_suffix("")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("dead_letter_suffix"), "{err}");
    let err = App::builder(memory.clone())
        .concurrency(0)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("concurrency"), "{err}");
    let err = App::builder(memory.clone())
        .queue("q")
        .dead_letter_queue("q")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("consumed queue itself"), "{err}");
    let app = App::builder(memory.clone()).build().unwrap();
    assert!(app.publish("  \t", &json!({})).await.is_err());
    assert!(app.publish("urn:x", &json!([1])).await.is_err());
}

#[tokio::test]
async fn direct_dispatch_routes_on_an_out_of_band_urn_without_rewriting_the_body() {
    let memory = MemoryTransport::new();
    let seen = Arc::new(Mutex::new(String::new()));
    let s = seen.clone();
    let app = app(&memory)
        .handle("urn:routed", move |ctx: Context| {
            let s = s.clone();
            async move {
                *s.lock().unwrap() = format!("{} / {}", ctx.urn(), ctx.envelope().urn());
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let body = Envelope::builder("urn:in:body")
        .build()
        .unwrap()
        .encode()
        .unwrap();
    let delivery =
        babelqueue_core::Delivery::new("orders", body.as_bytes().to_vec()).with_urn("urn:routed");
    assert_eq!(app.dispatch(delivery).await, Outcome::Acked);
    assert_eq!(*seen.lock().unwrap(), "urn:routed / urn:in:body");
    // an undecodable body is never rescued by a route
    let delivery =
        babelqueue_core::Delivery::new("orders", b"nope".to_vec()).with_urn("urn:routed");
    assert_eq!(
        App::builder(memory.clone())
            .queue("orders")
            .dead_letter(true)
            .build()
            .unwrap()
            .dispatch(delivery)
            .await,
        Outcome::DeadLettered
    );
    let _ = memory.transport_name();
}

trait Name {
    fn transport_name(&self) -> &'static str;
}
impl Name for MemoryTransport {
    fn transport_name(&self) -> &'static str {
        Transport::name(self)
    }
}

/// Delegates to a [`MemoryTransport`] and records (or refuses) `prepare_consume`.
#[derive(Debug)]
struct Preparing {
    memory: MemoryTransport,
    prepared: Mutex<Vec<(String, usize)>>,
    refuse: Option<babelqueue_core::TransportErrorKind>,
}

#[async_trait::async_trait]
impl Transport for Preparing {
    fn name(&self) -> &'static str {
        "preparing"
    }
    async fn publish(
        &self,
        queue: &str,
        body: &[u8],
    ) -> Result<(), babelqueue_core::TransportError> {
        self.memory.publish(queue, body).await
    }
    async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<babelqueue_core::Delivery>, babelqueue_core::TransportError> {
        self.memory.pop(queue, timeout).await
    }
    async fn ack(
        &self,
        delivery: &babelqueue_core::Delivery,
    ) -> Result<(), babelqueue_core::TransportError> {
        self.memory.ack(delivery).await
    }
    async fn prepare_consume(
        &self,
        queue: &str,
        concurrency: usize,
    ) -> Result<(), babelqueue_core::TransportError> {
        self.prepared
            .lock()
            .unwrap()
            .push((queue.to_owned(), concurrency));
        match self.refuse {
            Some(kind) => Err(babelqueue_core::TransportError::new(kind, "refused")),
            None => Ok(()),
        }
    }
}

fn preparing(refuse: Option<babelqueue_core::TransportErrorKind>) -> Arc<Preparing> {
    Arc::new(Preparing {
        memory: MemoryTransport::new(),
        prepared: Mutex::new(Vec::new()),
        refuse,
    })
}

#[tokio::test]
async fn consume_tells_the_transport_its_queue_and_concurrency_first() {
    use babelqueue_core::TransportErrorKind;
    for (refuse, consumed) in [
        (None, true),
        (Some(TransportErrorKind::Connection), true),
        (Some(TransportErrorKind::Config), false),
    ] {
        let transport = preparing(refuse);
        let app = App::builder_arc(transport.clone())
            .queue("orders")
            .concurrency(3)
            .poll_timeout(Duration::from_millis(20))
            .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
            .build()
            .unwrap();
        app.publish(URN, &json!({})).await.unwrap();
        let result = app.consume(drain().queue("orders")).await;
        assert_eq!(
            *transport.prepared.lock().unwrap(),
            vec![("orders".to_owned(), 3)],
            "{refuse:?}"
        );
        if consumed {
            assert_eq!(result.unwrap().processed, 1, "{refuse:?}");
            assert_eq!(transport.memory.len("orders"), 0);
        } else {
            let err = result.unwrap_err();
            assert_eq!(err.kind(), babelqueue_core::ErrorKind::Config, "{err}");
            assert_eq!(transport.memory.len("orders"), 1, "nothing was received");
        }
    }
}

#[tokio::test]
async fn max_messages_with_an_idle_timeout_waits_for_more_instead_of_stopping_when_empty() {
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    app.publish(URN, &json!({"n": 1})).await.unwrap();
    let late = {
        let app = app.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            app.publish(URN, &json!({"n": 2})).await.unwrap();
        })
    };
    let summary = app
        .consume(
            Consume::new()
                .max_messages(2)
                .idle_timeout(Duration::from_secs(5))
                .handle_signals(false),
        )
        .await
        .unwrap();
    late.await.unwrap();
    assert_eq!(summary.processed, 2);

    // Without an idle timeout, an empty poll ends it (drain what is there).
    app.publish(URN, &json!({"n": 3})).await.unwrap();
    let summary = app
        .consume(Consume::new().max_messages(2).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 1);
}

/// Negative `attempts` is a valid envelope, but counts as 0 on the retry path: it never buys
/// extra deliveries, and `i64::MIN` still reaches the dead-letter queue.
#[tokio::test]
async fn negative_attempts_never_buy_extra_deliveries() {
    for before in [-5_i64, i64::MIN] {
        let memory = MemoryTransport::new();
        let calls = Calls::default();
        let c = calls.clone();
        let app = app(&memory)
            .max_attempts(3)
            .dead_letter(true)
            .handle(URN, move |ctx: Context| {
                c.record(&ctx);
                async { Err::<(), _>(HandlerError::new("boom")) }
            })
            .build()
            .unwrap();
        let body = format!(r#"{{"job":"{URN}","data":{{}},"attempts":{before}}}"#);
        memory.publish("orders", body.as_bytes()).await.unwrap();
        app.consume(drain()).await.unwrap();
        assert_eq!(calls.attempts(), [before, 1, 2], "{before}");
        let dlq = memory.bodies("orders.dlq");
        assert_eq!(dlq.len(), 1, "{before}");
        assert_eq!(json_of(&dlq[0])["dead_letter"]["attempts"], 3);
    }
}

/// A transport whose every receive fails with one kind of error.
#[derive(Debug)]
struct Refusing(babelqueue_core::TransportErrorKind);

#[async_trait::async_trait]
impl Transport for Refusing {
    fn name(&self) -> &'static str {
        "refusing"
    }
    async fn publish(&self, _: &str, _: &[u8]) -> Result<(), babelqueue_core::TransportError> {
        Ok(())
    }
    async fn pop(
        &self,
        _: &str,
        _: Duration,
    ) -> Result<Option<babelqueue_core::Delivery>, babelqueue_core::TransportError> {
        Err(babelqueue_core::TransportError::new(
            self.0,
            "the broker refused user \"app\" (wrong password)",
        ))
    }
    async fn ack(
        &self,
        _: &babelqueue_core::Delivery,
    ) -> Result<(), babelqueue_core::TransportError> {
        Ok(())
    }
}

/// Refused credentials (or a receive the client gave up on for good) end the loop with the
/// error; a transient error is polled again.
#[tokio::test]
async fn refused_credentials_end_the_consume_loop_with_the_error() {
    use babelqueue_core::TransportErrorKind as K;
    for (kind, stops) in [(K::Auth, true), (K::Config, true), (K::Connection, false)] {
        let app = App::builder(Refusing(kind))
            .poll_timeout(Duration::from_millis(20))
            .rewind_pause(Duration::from_millis(20))
            .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let run = tokio::time::timeout(
            Duration::from_millis(1_500),
            app.consume(Consume::new().handle_signals(false)),
        )
        .await;
        if stops {
            let err = run
                .expect("the loop stops instead of polling forever")
                .unwrap_err();
            assert!(started.elapsed() < Duration::from_secs(1), "{kind:?}");
            assert!(err.to_string().contains("wrong password"), "{err}");
            assert!(!err.is_transient());
        } else {
            assert!(run.is_err(), "{kind:?}: a transient error is polled again");
        }
    }
}

/// A transport whose receive answers "nothing" at once, whatever the timeout (a short poll, an
/// in-memory fake): counts its receives.
#[derive(Debug, Default)]
struct AnswersAtOnce(Arc<AtomicUsize>);

#[async_trait::async_trait]
impl Transport for AnswersAtOnce {
    fn name(&self) -> &'static str {
        "answers-at-once"
    }
    async fn publish(
        &self,
        _queue: &str,
        _body: &[u8],
    ) -> Result<(), babelqueue_core::TransportError> {
        Ok(())
    }
    async fn pop(
        &self,
        _queue: &str,
        _timeout: Duration,
    ) -> Result<Option<babelqueue_core::Delivery>, babelqueue_core::TransportError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(None)
    }
    async fn ack(
        &self,
        _delivery: &babelqueue_core::Delivery,
    ) -> Result<(), babelqueue_core::TransportError> {
        Ok(())
    }
}

/// The loop waits out the poll timeout after an empty receive that came back early, instead of
/// spinning: about one receive per poll timeout (it used to be hundreds of thousands a second,
/// which starved the runtime's timers on a fake).
#[tokio::test]
async fn an_empty_receive_that_answers_at_once_is_waited_out() {
    let receives = Arc::new(AtomicUsize::new(0));
    let app = App::builder(AnswersAtOnce(receives.clone()))
        .queue("orders")
        .poll_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    app.consume(
        Consume::new()
            .idle_timeout(Duration::from_millis(1000))
            .handle_signals(false),
    )
    .await
    .unwrap();
    let n = receives.load(Ordering::SeqCst);
    assert!(
        (5..=20).contains(&n),
        "{n} receives in {:?} with a 100 ms poll timeout",
        started.elapsed()
    );
}

#[test]
fn every_outcome_has_its_own_snake_case_name() {
    let all = [
        Outcome::Acked,
        Outcome::Dropped,
        Outcome::Retried,
        Outcome::Released,
        Outcome::DeadLettered,
        Outcome::Native,
        Outcome::Unsettled,
        Outcome::Interrupted,
    ];
    let names: std::collections::BTreeSet<&str> = all.iter().map(|o| o.as_str()).collect();
    assert_eq!(names.len(), all.len());
    assert!(
        names
            .iter()
            .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
    );
    assert_eq!(Outcome::DeadLettered.as_str(), "dead_lettered");
}
