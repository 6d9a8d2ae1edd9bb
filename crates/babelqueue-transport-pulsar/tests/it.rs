//! Integration tests against a real Pulsar broker: `scripts/brokers.sh up pulsar` starts a
//! standalone one on 127.0.0.1:6650; the URL comes from `BQ_PULSAR_URL`.
//!
//! Without a reachable broker every test prints `SKIPPED: pulsar not reachable` and returns,
//! unless `BQ_REQUIRE_BROKERS` is set (CI), where it fails. Each test uses its own topics.

#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, Count, HandlerError, Transport};
use babelqueue_testkit::reading::{Class, classify};
use babelqueue_transport_pulsar::{
    NativeClient, Properties, PulsarClient, PulsarOptions, PulsarTransport, projection,
};
use serde_json::Value;

const URN: &str = "urn:babel:orders:created";

fn url() -> String {
    std::env::var("BQ_PULSAR_URL").unwrap_or_else(|_| "pulsar://127.0.0.1:6650".to_owned())
}

fn required() -> bool {
    std::env::var_os("BQ_REQUIRE_BROKERS").is_some()
}

/// A client on its own subscription, for inspecting topics; `None` (after a loud SKIPPED line)
/// when the broker is unreachable and not required.
async fn inspector() -> Option<NativeClient> {
    let options = PulsarOptions {
        subscription: "it-inspect".to_owned(),
        connect_timeout: Duration::from_secs(3),
        ..PulsarOptions::default()
    };
    match NativeClient::connect(&url(), options).await {
        Ok(client) => Some(client),
        Err(e) if required() => panic!(
            "BQ_REQUIRE_BROKERS is set but Pulsar at {} is not reachable: {e}",
            url()
        ),
        Err(e) => {
            println!("SKIPPED: pulsar not reachable at {} ({e})", url());
            None
        }
    }
}

async fn transport() -> PulsarTransport {
    PulsarTransport::connect(&url())
        .await
        .expect("the broker answered the inspector, so the transport connects")
}

fn unique(name: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "it-{name}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

fn envelope(queue: &str, attempts: i64) -> Vec<u8> {
    let mut e = babelqueue_core::Envelope::builder(URN)
        .queue(queue)
        .data(&serde_json::json!({"order_id": 1042}))
        .build()
        .unwrap();
    e.set_attempts(attempts);
    e.encode().unwrap().into_bytes()
}

async fn receive(client: &NativeClient, topic: &str) -> babelqueue_transport_pulsar::Received {
    for _ in 0..20 {
        if let Some(m) = client.receive(topic, Duration::from_secs(1)).await.unwrap() {
            client.ack(&m.id).await.unwrap();
            return m;
        }
    }
    panic!("nothing arrived on {topic}");
}

fn app(transport: PulsarTransport, queue: &str) -> babelqueue_core::AppBuilder {
    App::builder(transport)
        .queue(queue)
        .poll_timeout(Duration::from_millis(500))
        .rewind_pause(Duration::from_millis(50))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_projects_string_properties_and_keeps_the_body_byte_for_byte() {
    let Some(inspect) = inspector().await else {
        return;
    };
    let queue = unique("projection");
    let body = envelope(&queue, 0);
    transport().await.publish(&queue, &body).await.unwrap();
    let got = receive(&inspect, &queue).await;
    assert_eq!(got.payload, body);
    assert_eq!(got.properties, projection::properties(&body));
    assert_eq!(got.properties["bq-job"], URN);
    assert_eq!(got.properties["bq-attempts"], "0");
    assert_eq!(got.properties["bq-schema-version"], "1");
    assert_eq!(got.properties["bq-source-lang"], "rust");
    assert_eq!(got.properties.len(), 6);
}

/// A batch publish keeps a window of receipts in flight and lands in order, byte for byte,
/// each message with the properties a single publish gives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_publish_lands_in_order_with_the_projection_of_each_body() {
    use babelqueue_core::BatchPublisher as _;
    let Some(inspect) = inspector().await else {
        return;
    };
    let queue = unique("batch");
    let bodies: Vec<Vec<u8>> = (0..300).map(|n| envelope(&queue, n % 3)).collect();
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    transport()
        .await
        .publish_batch(&queue, &slices)
        .await
        .unwrap();
    for body in &bodies {
        let got = receive(&inspect, &queue).await;
        assert_eq!(&got.payload, body, "in order, byte for byte");
        assert_eq!(got.properties, projection::properties(body));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_is_retried_by_republish_then_dead_lettered() {
    let Some(inspect) = inspector().await else {
        return;
    };
    let queue = unique("retry");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let transport = transport().await;
    let app = app(transport.clone(), &queue)
        .max_attempts(2)
        .dead_letter(true)
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(ctx.attempts());
                Err::<(), _>(HandlerError::new("payment service down"))
            }
        })
        .build()
        .unwrap();
    app.publish(URN, &serde_json::json!({"order_id": 1}))
        .await
        .unwrap();
    let summary = app
        .consume(Consume::new().max_messages(2).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 2);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![0, 1],
        "the retry carried attempts 1"
    );
    let record = receive(&inspect, &format!("{queue}.dlq")).await;
    let doc: Value = serde_json::from_slice(&record.payload).unwrap();
    assert_eq!(doc["dead_letter"]["reason"], "failed");
    assert_eq!(doc["dead_letter"]["attempts"], 2);
    assert_eq!(doc["dead_letter"]["error"], "payment service down");
    assert_eq!(record.properties["bq-attempts"], "2");
    assert_eq!(record.properties["bq-job"], URN);
    // nothing is left behind on the work queue
    assert!(
        transport
            .pop(&queue, Duration::from_millis(500))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_held_by_delayed_delivery_until_its_back_off_has_passed() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    const BACKOFF: Duration = Duration::from_secs(3);
    let queue = unique("backoff");
    // (attempts, when the handler started, when it returned)
    let calls = Arc::new(Mutex::new(Vec::<(i64, Instant, Instant)>::new()));
    let c = calls.clone();
    let transport = transport().await;
    let app = app(transport.clone(), &queue)
        .max_attempts(2)
        .dead_letter(true)
        .retry_backoff(BACKOFF)
        .handle(URN, move |ctx: Context| {
            let c = c.clone();
            async move {
                let started = Instant::now();
                let first = c.lock().unwrap().is_empty();
                c.lock()
                    .unwrap()
                    .push((ctx.attempts(), started, Instant::now()));
                if first {
                    Err(HandlerError::new("payment service down"))
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    app.publish(URN, &serde_json::json!({"order_id": 7}))
        .await
        .unwrap();
    let summary = tokio::time::timeout(
        Duration::from_secs(60),
        app.consume(
            Consume::new()
                .max_messages(2)
                // keep polling while the copy is held
                .idle_timeout(Duration::from_secs(20))
                .handle_signals(false),
        ),
    )
    .await
    .expect("the consume loop ended within a minute")
    .unwrap();
    assert_eq!(summary.processed, 2);
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[0].0, calls[1].0), (0, 1), "the retry counted");
    let gap = calls[1].1.duration_since(calls[0].2);
    assert!(
        gap >= BACKOFF,
        "the retry came back {gap:?} after the failure, before its {BACKOFF:?} back-off"
    );
    assert!(
        gap < BACKOFF + Duration::from_secs(5),
        "the retry came back {gap:?} after the failure, long after its {BACKOFF:?} back-off"
    );
    // the original was acked and the copy handled: nothing is left
    assert!(
        transport
            .pop(&queue, Duration::from_millis(500))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bq_job_property_routes_and_is_pinned_on_the_retry() {
    let Some(inspect) = inspector().await else {
        return;
    };
    let queue = unique("routing");
    let body = envelope(&queue, 0); // the body says urn:babel:orders:created
    let mut props = projection::properties(&body);
    props.insert("bq-job".into(), " urn:babel:orders:routed ".into());
    inspect.send(&queue, &body, props).await.unwrap();
    let routed = Arc::new(Mutex::new(Vec::new()));
    let body_urn_calls = Arc::new(AtomicUsize::new(0));
    let (r, b) = (routed.clone(), body_urn_calls.clone());
    let app = app(transport().await, &queue)
        .max_attempts(3)
        .handle("urn:babel:orders:routed", move |ctx: Context| {
            let r = r.clone();
            async move {
                let first = r.lock().unwrap().is_empty();
                r.lock()
                    .unwrap()
                    .push((ctx.attempts(), ctx.urn().into_owned()));
                if first {
                    Err(HandlerError::new("once"))
                } else {
                    Ok(())
                }
            }
        })
        .handle(URN, move |_ctx: Context| {
            let b = b.clone();
            async move {
                b.fetch_add(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    app.consume(Consume::new().max_messages(2).handle_signals(false))
        .await
        .unwrap();
    let routed = routed.lock().unwrap().clone();
    assert_eq!(routed.len(), 2, "{routed:?}");
    assert_eq!(routed[0].0, 0);
    assert_eq!(
        routed[1].0, 1,
        "the retry hop kept the routed URN and counted"
    );
    assert_eq!(body_urn_calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_gated_message_is_dead_lettered_raw_with_its_gate_properties() {
    let Some(inspect) = inspector().await else {
        return;
    };
    let queue = unique("gate");
    let body = b"{\n  \"job\": \"urn:babelqueue:order.created\", \"n\": 1E2 }\n".to_vec();
    let mut props = Properties::new();
    props.insert("bq-schema-version".into(), "2".into());
    props.insert("bq-job".into(), "urn:babelqueue:order.created".into());
    inspect.send(&queue, &body, props).await.unwrap();
    let handled = Arc::new(AtomicUsize::new(0));
    let h = handled.clone();
    let app = app(transport().await, &queue)
        .dead_letter(true)
        .handle("urn:babelqueue:order.created", move |_ctx: Context| {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    app.consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(handled.load(Ordering::SeqCst), 0);
    let record = receive(&inspect, &format!("{queue}.dlq")).await;
    assert_eq!(record.payload, body, "byte for byte, never re-encoded");
    assert_eq!(record.properties["bq-schema-version"], "2");
    assert_eq!(record.properties["bq-job"], "urn:babelqueue:order.created");
    assert!(
        !record
            .properties
            .values()
            .any(|v| v.starts_with("babelqueue:unsupported"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_utf8_reaches_the_dlq_with_its_exact_bytes() {
    let Some(inspect) = inspector().await else {
        return;
    };
    let queue = unique("poison");
    let body = b"\xff\xfe{\"job\":1}".to_vec();
    inspect
        .send(&queue, &body, Properties::new())
        .await
        .unwrap();
    let app = app(transport().await, &queue)
        .dead_letter(true)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    app.consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    let record = receive(&inspect, &format!("{queue}.dlq")).await;
    let doc: Value = serde_json::from_slice(&record.payload).unwrap();
    assert_eq!(doc["raw_encoding"], "base64");
    assert_eq!(doc["raw"], "//57ImpvYiI6MX0=");
    assert_eq!(doc["dead_letter"]["reason"], "poison");
}

/// The Inspector shows the message id and the metadata the broker stamped, and a nacked
/// message comes back with the same id, counted as redelivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_shows_the_message_id_the_metadata_and_a_redelivery() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let queue = unique("wire");
    let transport = transport().await;
    let body = envelope(&queue, 0);
    let sent_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    transport.publish(&queue, &body).await.unwrap();
    let inspector = transport.capabilities().inspector().expect("an Inspector");
    let first = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("delivered");
    let view = inspector.inspect(&first);
    let id = view.id.clone().expect("the message id");
    let parts: Vec<i64> = id.split(':').map(|p| p.parse().unwrap()).collect();
    assert_eq!(parts.len(), 4, "ledger:entry:partition:batch, got {id}");
    assert_eq!(view.redelivered, Some(false));
    let shown: std::collections::HashMap<&str, &str> = view
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let published: u128 = shown["publish_time"].parse().unwrap();
    assert!(
        published + 60_000 >= sent_at && published <= sent_at + 60_000,
        "{published} vs {sent_at}"
    );
    assert!(!shown["producer_name"].is_empty());
    assert_eq!(shown["sequence_id"], "0", "the producer's first message");
    assert_eq!(
        shown["bq-source-lang"], "rust",
        "a property that is not a fact"
    );
    assert!(!shown.contains_key("bq-job"), "a fact is not repeated");
    transport
        .capabilities()
        .rewinder()
        .expect("a Rewinder")
        .rewind(&first)
        .await
        .unwrap();
    let again = transport
        .pop(&queue, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("redelivered");
    let view = inspector.inspect(&again);
    assert_eq!(view.id.as_deref(), Some(id.as_str()));
    assert_eq!(view.redelivered, Some(true));
    transport.ack(&again).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nack_brings_the_message_back_with_its_redelivery_counted() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let queue = unique("nack");
    let transport = transport().await;
    let body = envelope(&queue, 0);
    transport.publish(&queue, &body).await.unwrap();
    let first = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("delivered");
    assert_eq!(
        first.facts().count,
        Some(Count::CarriedOrBody {
            carried: Some(0),
            redelivered: 0
        })
    );
    transport
        .capabilities()
        .rewinder()
        .expect("Pulsar rewinds")
        .rewind(&first)
        .await
        .unwrap();
    let second = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("redelivered after the nack");
    assert_eq!(
        second.facts().count,
        Some(Count::CarriedOrBody {
            carried: Some(0),
            redelivered: 1
        }),
        "the redelivery is counted"
    );
    assert_eq!(second.body(), body, "handed over byte for byte");
    assert_eq!(second.facts().urn.as_deref(), Some(URN));
    let Class::Readable {
        body: reconciled,
        urn,
        routed,
        ..
    } = classify(second.body(), second.facts(), &queue)
    else {
        panic!("a readable envelope")
    };
    let doc: Value = serde_json::from_slice(&reconciled).unwrap();
    assert_eq!(
        doc["attempts"], 1,
        "reconciled: max(bq-attempts 0, redelivery count 1)"
    );
    assert_eq!((urn.as_str(), routed), (URN, true), "bq-job routes");
    transport.ack(&second).await.unwrap();
    assert!(
        transport
            .pop(&queue, Duration::from_millis(500))
            .await
            .unwrap()
            .is_none()
    );
}

/// `PUT path` on the broker's admin HTTP port; the status line.
fn admin_put(path: &str) -> String {
    use std::io::{Read, Write};
    let addr = std::env::var("BQ_PULSAR_ADMIN").unwrap_or_else(|_| "127.0.0.1:8080".to_owned());
    let mut stream = std::net::TcpStream::connect(&addr).expect("the admin port answers");
    write!(
        stream,
        "PUT {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

async fn pop(transport: &PulsarTransport, queue: &str) -> babelqueue_core::Delivery {
    transport
        .pop(queue, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("delivered")
}

fn counted(delivery: &babelqueue_core::Delivery) -> Option<Count> {
    delivery.facts().count
}

const fn pulsar_count(carried: i64, redelivered: i64) -> Option<Count> {
    Some(Count::CarriedOrBody {
        carried: Some(carried),
        redelivered,
    })
}

/// The redelivery count is the process's: the client's own reconnection after a topic unload
/// and the transport building its consumer again (after `close`, as after a failed receive)
/// keep it, because the counts belong to the client, not to one consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redelivery_count_survives_a_reconnect_and_a_rebuilt_consumer() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let queue = unique("rc-process");
    let transport = transport().await;
    transport
        .publish(&queue, &envelope(&queue, 0))
        .await
        .unwrap();
    let first = pop(&transport, &queue).await;
    assert_eq!(counted(&first), pulsar_count(0, 0));

    // The consumer is closed with the message handed out and not acknowledged; the next pop
    // subscribes again and the broker hands the message back.
    transport.close().await.unwrap();
    let second = pop(&transport, &queue).await;
    assert_eq!(second.body(), first.body());
    assert_eq!(
        counted(&second),
        pulsar_count(0, 1),
        "counted across the rebuilt consumer"
    );

    // The broker drops the topic's consumers; the client reconnects on its own.
    let status = admin_put(&format!(
        "/admin/v2/persistent/public/default/{queue}/unload"
    ));
    assert!(
        status.contains(" 204") || status.contains(" 200"),
        "{status}"
    );
    let third = pop(&transport, &queue).await;
    assert_eq!(third.body(), first.body());
    assert_eq!(
        counted(&third),
        pulsar_count(0, 2),
        "counted across the reconnection"
    );
    transport.ack(&third).await.unwrap();
    transport.close().await.unwrap();
}

/// What another process sees: the redeliveries counted in process A are not known to process
/// B, whose count starts at 0; what the runtime wrote on its copy-retries (`bq-attempts` and
/// the body's `attempts`) is carried to every process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_starts_the_count_again_but_a_copy_retry_carries_its_attempts() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let queue = unique("rc-other");
    let a = transport().await;
    a.publish(&queue, &envelope(&queue, 0)).await.unwrap();
    let first = pop(&a, &queue).await;
    let rewinder = a.capabilities().rewinder().expect("Pulsar rewinds");
    rewinder.rewind(&first).await.unwrap();
    let again = pop(&a, &queue).await;
    assert_eq!(counted(&again), pulsar_count(0, 1), "A counts its own nack");
    // A stops with the message handed out and not acknowledged (as a crash would).
    a.close().await.unwrap();

    // The runtime on B: attempts 0, as on a first delivery; the handler fails, and the copy
    // the runtime publishes carries attempts 1.
    let b = transport().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = app(b.clone(), &queue)
        .max_attempts(5)
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                s.lock()
                    .unwrap()
                    .push((ctx.attempts(), ctx.native_attempts()));
                Err::<(), _>(HandlerError::new("boom"))
            }
        })
        .build()
        .unwrap();
    app.consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(0, 0)],
        "B never saw the message before: A's redelivery is not counted"
    );
    b.close().await.unwrap();

    let c = transport().await;
    let copy = pop(&c, &queue).await;
    assert_eq!(
        counted(&copy),
        pulsar_count(1, 0),
        "the copy carries bq-attempts 1"
    );
    c.ack(&copy).await.unwrap();
}

// ------------------------------------------------------------------------------------------
// Interop with the reference Python SDK (babelqueue 1.24.0 + pulsar-client)

fn python() -> Option<PathBuf> {
    let path = std::env::var_os("BQ_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python"),
        PathBuf::from,
    );
    let ok = Command::new(&path)
        .args(["-c", "import babelqueue.pulsar_transport, pulsar"])
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(path);
    }
    if required() {
        panic!(
            "BQ_REQUIRE_BROKERS is set but {} cannot import babelqueue and pulsar (scripts/brokers.sh up python pulsar installs them)",
            path.display()
        );
    }
    println!(
        "SKIPPED: the reference Python SDK with pulsar-client is not installed at {}",
        path.display()
    );
    None
}

fn driver(python: &PathBuf, args: &[&str]) -> Vec<Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/driver.py");
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("the Python driver runs");
    assert!(
        out.status.success(),
        "driver {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{')) // pulsar-client logs to stdout too
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_publishes_and_rust_consumes() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let Some(python) = python() else { return };
    let queue = unique("py-to-rust");
    let transport = transport().await;
    // subscribe first, so the subscription exists before anything is published
    assert!(
        transport
            .pop(&queue, Duration::from_millis(200))
            .await
            .unwrap()
            .is_none()
    );
    driver(&python, &["publish", &url(), &queue, "3"]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = app(transport, &queue)
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push((
                    ctx.data_as::<Value>().unwrap(),
                    ctx.envelope().lang().map(|l| l.into_owned()),
                ));
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    app.consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    for (i, (data, lang)) in seen.iter().enumerate() {
        assert_eq!(data["order_id"], i);
        assert_eq!(lang.as_deref(), Some("python"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_publishes_and_python_consumes_including_a_retry() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let Some(python) = python() else { return };
    let queue = unique("rust-to-py");
    driver(&python, &["subscribe", &url(), &queue]);
    let transport = transport().await;
    let app = app(transport.clone(), &queue).build().unwrap();
    for i in 0..2 {
        app.publish(URN, &serde_json::json!({"order_id": i}))
            .await
            .unwrap();
    }
    // a retry hop written by Rust: attempts 1 in the body and in bq-attempts
    let mut retried = babelqueue_core::Envelope::decode(&envelope(&queue, 1))
        .unwrap()
        .envelope;
    retried.set_attempts(1);
    transport
        .publish(&queue, retried.encode().unwrap().as_bytes())
        .await
        .unwrap();
    let lines = driver(&python, &["consume", &url(), &queue, "3"]);
    let calls: Vec<&Value> = lines.iter().filter(|l| l.get("urn").is_some()).collect();
    assert_eq!(calls.len(), 3, "{lines:?}");
    assert!(calls.iter().all(|c| c["urn"] == URN && c["lang"] == "rust"));
    assert_eq!(calls.iter().filter(|c| c["attempts"] == 1).count(), 1);
}

/// The count the broker itself keeps (`CommandMessage.redelivery_count`, which the `pulsar`
/// crate does not hand over) does not outlive the consumer that held the message either. The
/// C++ client the reference SDK wraps reads it: 1 and 2 after two nacks, then 0 in the next
/// consumer once the first closed holding the message; and 0 after this transport's consumer
/// nacked it and closed holding it. A new process of this transport reads 0 there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_brokers_own_count_is_dropped_with_the_consumer_that_held_the_message() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let Some(python) = python() else { return };
    let counts = |lines: Vec<Value>| -> Vec<Value> {
        lines
            .into_iter()
            .map(|l| l["redelivery_count"].clone())
            .collect()
    };
    let a = transport().await;
    let queue = unique("rc-broker-cpp");
    a.publish(&queue, &envelope(&queue, 0)).await.unwrap();
    assert_eq!(
        counts(driver(&python, &["bare-nack", &url(), &queue, "2"])),
        [0, 1, 2],
        "the broker counts each nack while the consumer lives"
    );
    assert_eq!(
        counts(driver(&python, &["bare-redelivery", &url(), &queue])),
        [0],
        "and forgets them once it closed holding the message"
    );

    let queue = unique("rc-broker-rust");
    a.publish(&queue, &envelope(&queue, 0)).await.unwrap();
    let first = pop(&a, &queue).await;
    let rewinder = a.capabilities().rewinder().expect("Pulsar rewinds");
    rewinder.rewind(&first).await.unwrap();
    let again = pop(&a, &queue).await;
    assert_eq!(counted(&again), pulsar_count(0, 1));
    a.close().await.unwrap();
    assert_eq!(
        counts(driver(&python, &["bare-redelivery", &url(), &queue])),
        [0],
        "the broker forgot the nack when this transport's consumer closed"
    );
}

// ------------------------------------------------------------------------------------------
// The `babelqueue` binary with the `pulsar` and `asb` features

fn cli() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "-q",
            "-p",
            "babelqueue-cli",
            "--features",
            "pulsar,asb",
        ])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the CLI failed");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    target.join("debug").join("babelqueue")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_publishes_and_consumes_pulsar_urls_and_routes_sb_urls_to_service_bus() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let bin = cli();
    let queue = unique("cli");
    let out = Command::new(&bin)
        .args([
            "publish",
            &url(),
            "--queue",
            &queue,
            "--urn",
            URN,
            "--data",
            r#"{"order_id":7}"#,
            "--count",
            "2",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&bin)
        .args([
            "consume",
            &url(),
            "--queue",
            &queue,
            "--max",
            "2",
            "--idle-timeout",
            "10",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines
            .iter()
            .all(|l| l["urn"] == URN && l["data"]["order_id"] == 7)
    );

    // sb:// reaches the Service Bus transport: no credentials is a clear configuration error …
    let no_aad = [
        "AZURE_TENANT_ID",
        "AZURE_CLIENT_ID",
        "AZURE_CLIENT_SECRET",
        "AZURE_FEDERATED_TOKEN_FILE",
    ];
    let mut publish = Command::new(&bin);
    for name in no_aad {
        publish.env_remove(name);
    }
    let out = publish
        .env_remove("AZURE_SERVICEBUS_CONNECTION_STRING")
        // The credential chain's managed-identity link asks IMDS: keep it on loopback (nothing
        // listens on port 9), and the Azure CLI link away from any real `az`.
        .env_remove("IDENTITY_ENDPOINT")
        .env("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://127.0.0.1:9")
        .env("PATH", "/nonexistent")
        .args(["publish", "sb://127.0.0.1:9", "--queue", "q", "--urn", URN])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("invalid Azure Service Bus configuration")
            && err.contains("AZURE_SERVICEBUS_CONNECTION_STRING"),
        "{err}"
    );
    // … with Azure AD credentials in the environment (the default without a key) it goes on
    // to connect, and the closed port is a connection error, not a configuration one …
    let out = Command::new(&bin)
        .env_remove("AZURE_SERVICEBUS_CONNECTION_STRING")
        .env("AZURE_TENANT_ID", "t")
        .env("AZURE_CLIENT_ID", "c")
        .env("AZURE_CLIENT_SECRET", "aad-secret-never-shown")
        .env("AZURE_AUTHORITY_HOST", "http://127.0.0.1:9")
        .args(["publish", "sb://127.0.0.1:9", "--queue", "q", "--urn", URN])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Azure Service Bus connection failed") && err.contains("127.0.0.1:9"),
        "{err}"
    );
    assert!(!err.contains("aad-secret-never-shown"), "{err}");
    // … and an unreachable namespace is a clear connection error (loopback, nothing listens).
    let out = Command::new(&bin)
        .env(
            "AZURE_SERVICEBUS_CONNECTION_STRING",
            "Endpoint=sb://127.0.0.1:9/;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true",
        )
        .args(["consume", "servicebus://ignored.example", "--queue", "q", "--max", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Azure Service Bus connection failed") && err.contains("127.0.0.1:9"),
        "{err}"
    );
}

// ------------------------------------------------------------------------------------------
// pulsar+ssl:// (the local broker's TLS port, its certificate signed by a private test CA)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulsar_ssl_urls_round_trip_over_tls() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let (Ok(ssl_url), Ok(ca)) = (
        std::env::var("BQ_PULSAR_SSL_URL"),
        std::env::var(babelqueue_transport_pulsar::TLS_TRUST_CERTS_ENV),
    ) else {
        assert!(
            !required(),
            "BQ_REQUIRE_BROKERS is set but BQ_PULSAR_SSL_URL / BQ_PULSAR_TLS_TRUST_CERTS are not (eval \"$(scripts/brokers.sh env pulsar)\")"
        );
        println!("SKIPPED: BQ_PULSAR_SSL_URL and BQ_PULSAR_TLS_TRUST_CERTS are not set");
        return;
    };
    assert!(ssl_url.starts_with("pulsar+ssl://"));
    let queue = unique("tls");
    // through `connect(url)`, which trusts the CA the environment names, as the CLI does
    let transport = PulsarTransport::connect(&ssl_url).await.unwrap();
    let app = app(transport, &queue)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    assert!(
        app.transport()
            .pop(&queue, Duration::from_millis(200))
            .await
            .unwrap()
            .is_none()
    );
    app.publish(URN, &serde_json::json!({"tls": true}))
        .await
        .unwrap();
    let summary = app
        .consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 1);

    // without the private CA the broker's certificate is refused: TLS really is in use
    let options = PulsarOptions {
        ca_file: None,
        connect_timeout: Duration::from_secs(3),
        ..PulsarOptions::default()
    };
    let refused = NativeClient::connect(&ssl_url, options.clone()).await;
    assert!(
        refused.is_err(),
        "a certificate from an unknown CA was accepted"
    );
    // the same CA named by the URL query key `ca_file` (the spelling every TLS transport
    // shares) is trusted again
    let with_ca = format!("{ssl_url}?ca_file={ca}");
    let client = NativeClient::connect(&with_ca, options).await.unwrap();
    client
        .send(&format!("{queue}-ca"), b"{}".as_slice(), Properties::new())
        .await
        .unwrap();
    // and a trust file that cannot be read is a configuration error
    let missing = PulsarTransport::builder(&ssl_url)
        .unwrap()
        .ca_file(std::env::temp_dir().join(format!("bq-no-ca-{}.pem", std::process::id())))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), babelqueue_core::TransportErrorKind::Config);
    assert!(PathBuf::from(ca).exists());
}

// ------------------------------------------------------------------------------------------
// The subscription, as the broker's admin API reports it

/// `GET path` on the broker's admin HTTP port (`BQ_PULSAR_ADMIN`, default 127.0.0.1:8080).
fn admin_get(path: &str) -> Value {
    use std::io::{Read, Write};
    let addr = std::env::var("BQ_PULSAR_ADMIN").unwrap_or_else(|_| "127.0.0.1:8080".to_owned());
    let mut stream = std::net::TcpStream::connect(&addr).expect("the admin port answers");
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{head}"
    );
    serde_json::from_str(body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_share_one_subscription_named_babelqueue() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let queue = unique("subscription");
    let first = transport().await;
    let second = transport().await;
    for t in [&first, &second] {
        assert!(
            t.pop(&queue, Duration::from_millis(200))
                .await
                .unwrap()
                .is_none()
        );
    }
    let stats = admin_get(&format!(
        "/admin/v2/persistent/public/default/{queue}/stats"
    ));
    let subscriptions = stats["subscriptions"].as_object().unwrap();
    assert_eq!(
        subscriptions.keys().collect::<Vec<_>>(),
        ["babelqueue"],
        "{stats}"
    );
    let babelqueue = &subscriptions["babelqueue"];
    assert_eq!(babelqueue["type"], "Shared");
    assert_eq!(
        babelqueue["consumers"].as_array().unwrap().len(),
        2,
        "two consumers, one subscription"
    );
    // Shared: both consumers get messages from the one subscription, none twice.
    for i in 0..10 {
        first
            .publish(&queue, &envelope(&format!("{queue}-{i}"), 0))
            .await
            .unwrap();
    }
    let mut got = 0;
    for t in [&first, &second].into_iter().cycle().take(40) {
        if let Some(d) = t.pop(&queue, Duration::from_millis(200)).await.unwrap() {
            t.ack(&d).await.unwrap();
            got += 1;
        }
        if got == 10 {
            break;
        }
    }
    assert_eq!(got, 10);
}

/// A transport's producer and consumer of one topic reach the broker on two connections: the
/// `pulsar` crate leaves Nagle's algorithm on, and on a shared connection a send queued behind
/// an ack (which the broker never answers) waited for the broker's delayed TCP ack, up to
/// 40 ms (the Pulsar open-loop benchmark's p99 at 100 msg/s went from 47 to 14 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_publishes_and_consumes_on_two_connections() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let queue = unique("connections");
    let transport = transport().await;
    transport
        .publish(&queue, &envelope(&queue, 0))
        .await
        .unwrap();
    let delivery = pop(&transport, &queue).await;
    transport.ack(&delivery).await.unwrap();
    let stats = admin_get(&format!(
        "/admin/v2/persistent/public/default/{queue}/stats"
    ));
    let address = |v: &Value| v["address"].as_str().unwrap_or_default().to_owned();
    let publishers: Vec<String> = stats["publishers"]
        .as_array()
        .unwrap()
        .iter()
        .map(address)
        .collect();
    let consumers: Vec<String> = stats["subscriptions"]["babelqueue"]["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(address)
        .collect();
    assert_eq!((publishers.len(), consumers.len()), (1, 1), "{stats}");
    assert!(!publishers[0].is_empty(), "{stats}");
    assert_ne!(
        publishers[0], consumers[0],
        "the producer and the consumer share a connection: {stats}"
    );
}

// ------------------------------------------------------------------------------------------
// Browsing (`babelqueue dlq list`) through the admin API

fn admin_url() -> String {
    std::env::var("BQ_PULSAR_ADMIN_URL").unwrap_or_else(|_| {
        let addr = std::env::var("BQ_PULSAR_ADMIN").unwrap_or_else(|_| "127.0.0.1:8080".to_owned());
        format!("http://{addr}")
    })
}

async fn browsing_transport(admin_url: Option<String>) -> PulsarTransport {
    PulsarTransport::builder(&url())
        .unwrap()
        .options(PulsarOptions {
            admin_url,
            ..PulsarOptions::default()
        })
        .connect()
        .await
        .unwrap()
}

fn subscriptions(queue: &str) -> Value {
    admin_get(&format!(
        "/admin/v2/persistent/public/default/{queue}/subscriptions"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsing_reads_the_backlog_in_place_before_and_after_the_subscription_exists() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let without = browsing_transport(None).await;
    assert!(without.capabilities().browser().is_none());

    let transport = browsing_transport(Some(admin_url())).await;
    let queue = unique("browse");
    let bodies = vec![
        envelope(&queue, 0),
        b"\x00not an envelope \xff{".to_vec(),
        envelope(&queue, 3),
    ];
    for body in &bodies {
        transport.publish(&queue, body).await.unwrap();
    }
    let browser = transport.capabilities().browser().expect("a browser");
    // No subscription yet: the retained messages a new one would start with, and none made.
    assert_eq!(browser.browse(&queue, 0).await.unwrap(), bodies);
    assert_eq!(browser.browse(&queue, 0).await.unwrap(), bodies);
    assert_eq!(browser.browse(&queue, 2).await.unwrap(), bodies[..2]);
    assert_eq!(subscriptions(&queue), serde_json::json!([]));

    // The subscription exists, one message delivered and not acknowledged: still the backlog.
    let first = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a delivery");
    assert_eq!(first.body(), &bodies[0][..]);
    assert_eq!(browser.browse(&queue, 0).await.unwrap(), bodies);
    assert_eq!(browser.browse(&queue, 0).await.unwrap(), bodies);
    assert_eq!(subscriptions(&queue), serde_json::json!(["babelqueue"]));

    // Consumed normally, all three are there; once acknowledged, the backlog is empty.
    transport.ack(&first).await.unwrap();
    assert_eq!(browser.browse(&queue, 0).await.unwrap(), bodies[1..]);
    let mut got = vec![first.body().to_vec()];
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < 3 && Instant::now() < deadline {
        if let Some(d) = transport.pop(&queue, Duration::from_secs(1)).await.unwrap() {
            got.push(d.body().to_vec());
            transport.ack(&d).await.unwrap();
        }
    }
    assert_eq!(got, bodies);
    assert!(
        transport
            .pop(&queue, Duration::from_millis(500))
            .await
            .unwrap()
            .is_none()
    );
    assert!(browser.browse(&queue, 0).await.unwrap().is_empty());
    assert!(
        browser
            .browse(&unique("never"), 0)
            .await
            .unwrap()
            .is_empty()
    );
}

/// `babelqueue dlq list` with `BQ_PULSAR_ADMIN_URL` reads the dead-letter queue in place: no
/// "cannot browse" note, the same three records twice in order, all still there afterwards;
/// without it the CLI says it drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_a_pulsar_dead_letter_queue_in_place_with_an_admin_url() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let bin = cli();
    let queue = unique("cli-dlq");
    let dlq = format!("{queue}.dlq");
    let transport = browsing_transport(None).await;
    let bodies: [&[u8]; 3] = [
        br#"{"job":"urn:babel:cli:a","trace_id":"t1","data":{},"meta":{"id":"m1"},"attempts":2}"#,
        b"not an envelope",
        br#"{"job":"urn:babel:cli:b","trace_id":"t3","data":{},"meta":{"id":"m3"},"attempts":2}"#,
    ];
    for body in bodies {
        transport.publish(&dlq, body).await.unwrap();
    }
    let list = |admin: bool| {
        let mut cmd = Command::new(&bin);
        cmd.args(["dlq", "list", &url(), "--queue", &queue]);
        if admin {
            cmd.env("BQ_PULSAR_ADMIN_URL", admin_url());
        } else {
            cmd.env_remove("BQ_PULSAR_ADMIN_URL");
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (lines, stderr)
    };
    let mut listings = Vec::new();
    for _ in 0..2 {
        let (lines, stderr) = list(true);
        assert!(!stderr.contains("cannot browse"), "{stderr}");
        listings.push(lines);
    }
    assert_eq!(
        listings[0], listings[1],
        "the same records, in the same order"
    );
    let ids: Vec<&Value> = listings[0].iter().map(|l| &l["message_id"]).collect();
    assert_eq!(
        ids,
        [
            &serde_json::json!("m1"),
            &Value::Null,
            &serde_json::json!("m3")
        ]
    );
    assert_eq!(listings[0][1]["body"], "not an envelope");
    assert_eq!(
        subscriptions(&dlq),
        serde_json::json!([]),
        "browsing subscribed nothing"
    );

    let mut left = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while left.len() < 3 && Instant::now() < deadline {
        if let Some(d) = transport.pop(&dlq, Duration::from_secs(1)).await.unwrap() {
            left.push(d.body().to_vec());
            transport.ack(&d).await.unwrap();
        }
    }
    assert_eq!(left, bodies.map(<[u8]>::to_vec), "nothing was taken");
    let (lines, stderr) = list(false);
    assert!(lines.is_empty());
    assert!(stderr.contains("cannot browse"), "{stderr}");
}

/// A batching, compressing producer elsewhere (the Java and Python clients batch by default)
/// stores several messages in one compressed entry: browsing lists each of them, byte for
/// byte, and takes none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsing_splits_an_entry_a_batching_producer_wrote() {
    let Some(_inspect) = inspector().await else {
        return;
    };
    let queue = unique("browse-batch");
    let bodies: Vec<Vec<u8>> = vec![
        envelope(&queue, 0),
        b"\x01raw\xfe".to_vec(),
        envelope(&queue, 1),
    ];
    let pulsar = pulsar::Pulsar::builder(url(), pulsar::TokioExecutor)
        .build()
        .await
        .unwrap();
    let mut producer = pulsar
        .producer()
        .with_topic(format!("persistent://public/default/{queue}"))
        .with_options(pulsar::ProducerOptions {
            batch_size: Some(3),
            // The broker hands the peeked entry back uncompressed.
            compression: Some(pulsar::compression::Compression::Zstd(
                pulsar::compression::CompressionZstd { level: 3 },
            )),
            ..pulsar::ProducerOptions::default()
        })
        .build()
        .await
        .unwrap();
    let mut receipts = Vec::new();
    for body in &bodies {
        receipts.push(producer.send_non_blocking(body.clone()).await.unwrap());
    }
    producer.send_batch().await.unwrap();
    for receipt in receipts {
        receipt.await.unwrap();
    }
    let entries = admin_get(&format!(
        "/admin/v2/persistent/public/default/{queue}/internalStats"
    ))["entriesAddedCounter"]
        .as_u64();
    assert_eq!(entries, Some(1), "the three messages are one batched entry");

    let transport = browsing_transport(Some(admin_url())).await;
    let browser = transport.capabilities().browser().expect("a browser");
    assert_eq!(browser.browse(&queue, 0).await.unwrap(), bodies);
    assert_eq!(browser.browse(&queue, 2).await.unwrap(), bodies[..2]);
    // With the subscription created (one message delivered, not acknowledged): the peek path.
    let first = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a delivery");
    assert_eq!(browser.browse(&queue, 0).await.unwrap(), bodies);
    transport.ack(&first).await.unwrap();
    let mut got = vec![first.body().to_vec()];
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < 3 && Instant::now() < deadline {
        if let Some(d) = transport.pop(&queue, Duration::from_secs(1)).await.unwrap() {
            got.push(d.body().to_vec());
            transport.ack(&d).await.unwrap();
        }
    }
    assert_eq!(got, bodies);
}
