//! The transport against RabbitMQ: round trip, retry then dead-letter, poison kept byte for
//! byte, a worker killed with SIGKILL mid-handler, a broker restart mid-stream.

use std::collections::HashSet;
use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, Headers, Transport};
use babelqueue_transport_amqp::AmqpTransport;
use babelqueue_transport_amqp::projection::properties_json;
use serde_json::json;

use crate::common::{self, Raw, json};

const URN: &str = "urn:babel:orders:created";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_with_the_contract_properties_and_traceparent() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    common::init_tracing();
    let q = common::queue("roundtrip");
    let raw = Raw::new(&url).await;
    let transport = AmqpTransport::connect(&url).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = App::builder(transport.clone())
        .queue(&q)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                let data: serde_json::Value = ctx.data_as()?;
                s.lock()
                    .unwrap()
                    .push((data, ctx.headers().clone(), ctx.envelope().attempts()));
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();

    // 1. The wire: body byte for byte, the cross-SDK properties, native-typed headers.
    let envelope = Envelope::builder(URN)
        .queue(&q)
        .trace_id("trace-rt")
        .data(&json!({"order_id": 1042, "note": "é/ü"}))
        .build()
        .unwrap();
    let headers = Headers::from([(
        "traceparent".to_owned(),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
    )]);
    app.publish_envelope(&q, &envelope, &headers).await.unwrap();
    let mut on_wire = raw.drain(&q).await;
    assert_eq!(on_wire.len(), 1);
    let (body, props) = on_wire.remove(0);
    assert_eq!(
        body,
        envelope.encode().unwrap().into_bytes(),
        "the body is the envelope, byte for byte"
    );
    let view = properties_json(&props);
    assert_eq!(
        view["properties"],
        json!({"type": URN, "correlation_id": "trace-rt", "message_id": envelope.message_id().unwrap(),
            "app_id": "babelqueue", "content_type": "application/json", "content_encoding": "utf-8",
            "delivery_mode": 2})
    );
    assert_eq!(
        view["headers"],
        json!({"x-schema-version": 1, "x-source-lang": "rust", "x-attempts": 0,
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    );

    // 2. Through the worker: handled once, headers surfaced, acknowledged.
    app.publish_envelope(&q, &envelope, &headers).await.unwrap();
    let summary = app
        .consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 1);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, json!({"order_id": 1042, "note": "é/ü"}));
    assert_eq!(seen[0].1["traceparent"], headers["traceparent"]);
    assert_eq!(seen[0].1["x-attempts"], "0");
    assert_eq!(seen[0].2, 0);
    assert_eq!(
        raw.wait_depth(&q, 0, Duration::from_secs(2)).await,
        0,
        "acknowledged"
    );
    // Nothing left unacknowledged either: closing the transport requeues nothing.
    transport.close().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(raw.declare(&q).await, 0);
    raw.delete(&[&q]).await;
}

/// The Inspector reads what RabbitMQ said of each delivery: the `message_id` property, the
/// `redelivered` flag (set once the broker requeued the message when its channel closed), the
/// routing and the basic properties.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_shows_the_message_id_the_routing_and_a_redelivery() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let q = common::queue("inspect");
    let raw = Raw::new(&url).await;
    let envelope = Envelope::builder(URN)
        .queue(&q)
        .trace_id("trace-inspect")
        .data(&json!({"order_id": 7}))
        .build()
        .unwrap();
    let body = envelope.encode().unwrap().into_bytes();
    let id = envelope.message_id().unwrap().to_string();

    let first = AmqpTransport::connect(&url).await.unwrap();
    first.publish(&q, &body).await.unwrap();
    let delivery = first
        .pop(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the message");
    let view = first
        .capabilities()
        .inspector()
        .expect("an Inspector")
        .inspect(&delivery);
    assert_eq!(view.id.as_deref(), Some(id.as_str()));
    assert_eq!(view.redelivered, Some(false));
    let shown: std::collections::HashMap<&str, &str> = view
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(shown["exchange"], "");
    assert_eq!(shown["routing_key"], q);
    assert_eq!(shown["type"], URN);
    assert_eq!(shown["correlation_id"], "trace-inspect");
    assert_eq!(shown["delivery_mode"], "2");
    assert!(shown["delivery_tag"].parse::<u64>().unwrap() >= 1);
    // Closed unacknowledged: RabbitMQ requeues it and marks the next delivery redelivered.
    first.close().await.unwrap();
    drop(delivery);
    let second = AmqpTransport::connect(&url).await.unwrap();
    let again = second
        .pop(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the requeued message");
    let view = second
        .capabilities()
        .inspector()
        .expect("an Inspector")
        .inspect(&again);
    assert_eq!(view.id.as_deref(), Some(id.as_str()));
    assert_eq!(
        view.redelivered,
        Some(true),
        "the broker says it delivered it before"
    );
    second.ack(&again).await.unwrap();
    second.close().await.unwrap();
    assert_eq!(raw.wait_depth(&q, 0, Duration::from_secs(2)).await, 0);
    raw.delete(&[&q]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_then_dead_letter() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    common::init_tracing();
    let q = common::queue("retry");
    let dlq = format!("{q}.dlq");
    let raw = Raw::new(&url).await;
    let attempts_seen = Arc::new(Mutex::new(Vec::new()));
    let a = attempts_seen.clone();
    let app = App::builder(AmqpTransport::connect(&url).await.unwrap())
        .queue(&q)
        .max_attempts(3)
        .dead_letter(true)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, move |ctx: Context| {
            let a = a.clone();
            async move {
                a.lock().unwrap().push(ctx.envelope().attempts());
                Err::<(), _>(
                    HandlerError::new("payment service down").with_exception("PaymentError"),
                )
            }
        })
        .build()
        .unwrap();
    let id = app.publish(URN, &json!({"order_id": 7})).await.unwrap();
    let summary = app
        .consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 3);
    assert_eq!(
        *attempts_seen.lock().unwrap(),
        vec![0, 1, 2],
        "two retries, counted in the body"
    );
    assert_eq!(raw.wait_depth(&q, 0, Duration::from_secs(2)).await, 0);
    let records = raw.drain(&dlq).await;
    assert_eq!(records.len(), 1, "exactly one dead-letter record");
    let (record, props) = &records[0];
    let record = json(record);
    assert_eq!(record["meta"]["id"], id.as_str());
    assert_eq!(record["attempts"], 3);
    assert_eq!(record["data"], json!({"order_id": 7}));
    let block = &record["dead_letter"];
    assert_eq!(block["reason"], "failed");
    assert_eq!(block["error"], "payment service down");
    assert_eq!(block["exception"], "PaymentError");
    assert_eq!(block["original_queue"], q.as_str());
    assert_eq!(block["attempts"], 3);
    assert_eq!(block["lang"], "rust");
    assert_eq!(properties_json(props)["headers"]["x-attempts"], 3);
    raw.delete(&[&q, &dlq]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_is_dead_lettered_byte_for_byte() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    common::init_tracing();
    let q = common::queue("poison");
    let dlq = format!("{q}.dlq");
    let raw = Raw::new(&url).await;
    let transport = AmqpTransport::connect(&url).await.unwrap();
    let handled = Arc::new(AtomicU64::new(0));
    let h = handled.clone();
    let app = App::builder(transport.clone())
        .queue(&q)
        .dead_letter(true)
        .poll_timeout(Duration::from_secs(2))
        .handle_any(move |_ctx: Context| {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let bodies: [&[u8]; 3] = [
        b"\xff\xfe{not utf-8 \x00 at all",
        br#"{"job":"urn:babel:orders:created","data":{"x":1},"attempts":"three"}"#,
        b"plain text, not JSON",
    ];
    for body in bodies {
        transport.publish(&q, body).await.unwrap();
    }
    let summary = app
        .consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 3);
    assert_eq!(
        handled.load(Ordering::SeqCst),
        0,
        "poison never reaches a handler"
    );
    let records = raw.drain(&dlq).await;
    assert_eq!(records.len(), 3);
    // Non-UTF-8: the exact bytes, base64 in `raw`.
    let first = json(&records[0].0);
    assert_eq!(first["raw_encoding"], "base64");
    let b64 = first["raw"].as_str().unwrap();
    assert_eq!(base64_decode(b64), bodies[0]);
    assert_eq!(first["dead_letter"]["reason"], "poison");
    assert_eq!(first["dead_letter"]["original_queue"], q.as_str());
    // A valid object with a wrong-typed member: spliced, every original byte kept in place.
    let second = String::from_utf8(records[1].0.clone()).unwrap();
    let original = std::str::from_utf8(bodies[1]).unwrap();
    assert!(
        second.starts_with(&original[..original.len() - 1])
            && second.contains(r#","dead_letter":{"reason":"poison""#),
        "{second}"
    );
    // Text: carried verbatim in `raw`.
    let third = json(&records[2].0);
    assert_eq!(third["raw"], "plain text, not JSON");
    assert_eq!(raw.wait_depth(&q, 0, Duration::from_secs(2)).await, 0);
    raw.delete(&[&q, &dlq]).await;
}

fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// The worker the SIGKILL test starts in a child process (this same test binary, re-executed
/// with `BQ_IT_WORKER=<queue>`); as an ordinary test it returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_worker_process() {
    let Ok(q) = std::env::var("BQ_IT_WORKER") else {
        return;
    };
    let app = App::builder(AmqpTransport::connect(&common::url()).await.unwrap())
        .queue(&q)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, |ctx: Context| async move {
            println!(
                "BQ-WORKER-HANDLING {}",
                ctx.envelope().message_id().unwrap_or_default()
            );
            // Mid-handler, forever: the parent kills this process here.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), HandlerError>(())
        })
        .build()
        .unwrap();
    app.consume(Consume::new().handle_signals(false))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_with_sigkill_mid_handler_loses_nothing() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    common::init_tracing();
    let q = common::queue("sigkill");
    let raw = Raw::new(&url).await;
    let transport = AmqpTransport::connect(&url).await.unwrap();
    let producer = App::builder(transport.clone()).queue(&q).build().unwrap();
    let id = producer
        .publish(URN, &json!({"order_id": 99}))
        .await
        .unwrap();

    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "live::sigkill_worker_process",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("BQ_IT_WORKER", &q)
            .env("BQ_AMQP_URL", &url)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the worker process starts"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints `test … ... ` without a newline first: find the marker anywhere.
            if let Some(at) = line.find("BQ-WORKER-HANDLING ") {
                let _ = tx.send(line[at + "BQ-WORKER-HANDLING ".len()..].trim().to_owned());
            }
        }
    });
    let handling = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the worker process picked the message up");
    assert_eq!(handling, id);
    // While the handler runs, the message is held by the worker (not in the ready queue).
    assert_eq!(raw.declare(&q).await, 0);
    child.0.kill().expect("SIGKILL"); // std sends SIGKILL on unix
    let status = child.0.wait().unwrap();
    assert!(!status.success(), "the worker was killed: {status:?}");

    // A second worker gets it back (RabbitMQ requeues unacknowledged deliveries when the
    // connection dies) and handles it.
    let handled = Arc::new(Mutex::new(Vec::new()));
    let h = handled.clone();
    let second = App::builder(transport.clone())
        .queue(&q)
        .poll_timeout(Duration::from_secs(5))
        .handle(URN, move |ctx: Context| {
            let h = h.clone();
            async move {
                h.lock().unwrap().push((
                    ctx.envelope().message_id().unwrap_or_default().into_owned(),
                    ctx.envelope().attempts(),
                ));
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let summary = second
        .consume(
            Consume::new()
                .max_messages(1)
                .idle_timeout(Duration::from_secs(20))
                .handle_signals(false),
        )
        .await
        .unwrap();
    assert_eq!(summary.processed, 1);
    assert_eq!(
        *handled.lock().unwrap(),
        vec![(id, 0)],
        "the same message, attempts unchanged"
    );
    assert_eq!(raw.wait_depth(&q, 0, Duration::from_secs(2)).await, 0);
    raw.delete(&[&q]).await;
}

/// Kills the worker process when the test ends early, so no orphan keeps consuming.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Restarts the RabbitMQ application (`rabbitmqctl start_app`) when dropped, so a failing
/// assertion cannot leave the broker down for the tests that follow.
struct StartAppOnDrop;

impl Drop for StartAppOnDrop {
    fn drop(&mut self) {
        let _ = rabbitmqctl("start_app");
    }
}

fn rabbitmqctl(command: &str) -> std::process::Output {
    let ctl = std::env::var("BQ_RABBITMQCTL").unwrap_or_else(|_| "rabbitmqctl".to_owned());
    let out = Command::new(&ctl)
        .arg(command)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {ctl} {command}: {e}"));
    assert!(
        out.status.success(),
        "{ctl} {command} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// How the broker goes away in the middle of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outage {
    /// `rabbitmqctl stop_app`, 2 s, `start_app`: the broker closes connections politely.
    StopApp,
    /// SIGKILL of the Erlang VM, 3 s, then a fresh start: sockets are reset, nothing is said.
    HardKill,
}

/// The pids of the RabbitMQ node's Erlang VM (it runs as the `rabbitmq` user).
fn rabbitmq_vm() -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-u", "rabbitmq", "-f", "beam.smp"])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Starts the broker again through the repository's script (whatever state it is in).
fn brokers_up_rabbitmq() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/brokers.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(["up", "rabbitmq"])
        .output()
        .expect("scripts/brokers.sh");
    assert!(
        out.status.success(),
        "scripts/brokers.sh up rabbitmq failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts the broker again when dropped, so a failing assertion after a hard kill cannot leave
/// it down for the tests that follow.
struct UpOnDrop;

impl Drop for UpOnDrop {
    fn drop(&mut self) {
        brokers_up_rabbitmq();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_mid_stream_loses_nothing_and_the_worker_keeps_running() {
    restart_mid_stream(Outage::StopApp).await;
}

/// After a hard crash of the node (SIGKILL, restart 3 s later) the worker once wedged in 2 of
/// 3 runs (no log, no idle timeout, SIGTERM ignored). It must reconnect, finish the stream,
/// and stop when asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_broker_kill_mid_stream_loses_nothing_and_the_worker_recovers_and_stops() {
    restart_mid_stream(Outage::HardKill).await;
}

async fn restart_mid_stream(outage: Outage) {
    // The hard kill runs with eight handlers at once, the shape that wedged, so acks and
    // prefetched deliveries are in flight on the connection when the node dies.
    let (n, concurrency, pace) = match outage {
        Outage::StopApp => (1_000, 2, 30),
        Outage::HardKill => (3_000, 8, 20),
    };
    let Some(url) = common::broker().await else {
        return;
    };
    let _exclusive = common::BROKER.write().await;
    common::init_tracing();
    let q = common::queue("restart");
    let transport = AmqpTransport::connect(&url).await.unwrap();
    let producer = App::builder(transport.clone()).queue(&q).build().unwrap();
    let mut ids = HashSet::new();
    for i in 0..n {
        ids.insert(producer.publish(URN, &json!({"i": i})).await.unwrap());
    }

    let handled: Arc<Mutex<HashSet<String>>> = Arc::default();
    let calls = Arc::new(AtomicU64::new(0));
    let (h, c) = (handled.clone(), calls.clone());
    let worker = App::builder(transport.clone())
        .queue(&q)
        .concurrency(concurrency)
        .poll_timeout(Duration::from_millis(500))
        .handle(URN, move |ctx: Context| {
            let (h, c) = (h.clone(), c.clone());
            async move {
                // ~15 s for the whole stream, so the restart lands in the middle of it.
                tokio::time::sleep(Duration::from_millis(pace)).await;
                c.fetch_add(1, Ordering::SeqCst);
                h.lock()
                    .unwrap()
                    .insert(ctx.envelope().message_id().unwrap_or_default().into_owned());
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let stop = worker.stop_handle();
    let running =
        tokio::spawn(async move { worker.consume(Consume::new().handle_signals(false)).await });

    let distinct = |h: &Arc<Mutex<HashSet<String>>>| h.lock().unwrap().len();
    let wait_until = |target: usize, within: Duration| {
        let h = handled.clone();
        async move {
            let deadline = tokio::time::Instant::now() + within;
            while distinct(&h) < target && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            distinct(&h)
        }
    };
    let before = wait_until(n / 10, Duration::from_secs(60)).await;
    assert!(
        before >= n / 10,
        "the worker started: {before} of {n} handled"
    );

    match outage {
        Outage::StopApp => {
            let _restart = StartAppOnDrop;
            rabbitmqctl("stop_app");
            let during = distinct(&handled);
            assert!(
                during < n,
                "the broker must stop in the middle of the stream, but all {n} were already handled"
            );
            println!("broker restart: {during} of {n} handled when the broker stopped");
            tokio::time::sleep(Duration::from_secs(2)).await;
            assert!(
                !running.is_finished(),
                "the worker survives the broker going away"
            );
        } // start_app
        Outage::HardKill => {
            let _up = UpOnDrop;
            let vm = rabbitmq_vm();
            assert!(!vm.is_empty(), "the RabbitMQ VM is running");
            let killed = Command::new("kill").arg("-9").args(&vm).status().unwrap();
            assert!(killed.success(), "kill -9 {vm:?}");
            let during = distinct(&handled);
            assert!(during < n, "the node must die in the middle of the stream");
            println!("hard kill: {during} of {n} handled when the node was killed");
            tokio::time::sleep(Duration::from_secs(3)).await;
            assert!(!running.is_finished(), "the worker survives the node dying");
        } // scripts/brokers.sh up rabbitmq
    }

    let after = wait_until(n, Duration::from_secs(120)).await;
    assert_eq!(after, n, "all {n} messages handled at least once");
    assert!(handled.lock().unwrap().is_subset(&ids));
    assert!(transport.reconnects() >= 1, "the supervisor reconnected");
    // Still running and still consuming: a message published after the restart is handled.
    producer.publish(URN, &json!({"i": "after"})).await.unwrap();
    let last = wait_until(n + 1, Duration::from_secs(30)).await;
    assert_eq!(last, n + 1, "the worker keeps consuming after the restart");
    assert!(!running.is_finished(), "the worker is still running");
    println!(
        "broker restart: {} distinct messages handled in {} handler calls, {} reconnect(s)",
        n + 1,
        calls.load(Ordering::SeqCst),
        transport.reconnects()
    );
    stop.stop();
    // A wedged worker would never return here: bounded, so the test fails instead of hanging.
    let summary = tokio::time::timeout(Duration::from_secs(45), running)
        .await
        .unwrap_or_else(|_| {
            panic!("the worker did not stop when asked after the outage ({outage:?})")
        })
        .unwrap()
        .unwrap();
    assert!(summary.processed > n as u64);
    let raw = Raw::new(&url).await;
    assert_eq!(
        raw.wait_depth(&q, 0, Duration::from_secs(5)).await,
        0,
        "nothing left behind"
    );
    raw.delete(&[&q]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_declared_with_other_arguments_is_a_clear_error_and_the_channel_recovers() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    common::init_tracing();
    let q = common::queue("mismatch");
    let fine = common::queue("after-mismatch");
    let raw = Raw::new(&url).await;
    raw.declare_with_ttl(&q).await;
    let transport = AmqpTransport::connect(&url).await.unwrap();
    let err = transport.publish(&q, b"{}").await.unwrap_err();
    let text = format!("{err} {:?}", std::error::Error::source(&err));
    assert!(
        !err.is_transient() && text.contains("already exists with different arguments"),
        "{text}"
    );
    // RabbitMQ closed the publishing channel; the next publish reopens it.
    transport.publish(&fine, b"{}").await.unwrap();
    assert_eq!(raw.wait_depth(&fine, 1, Duration::from_secs(2)).await, 1);
    raw.delete(&[&q, &fine]).await;
}

/// A quorum queue provisioned elsewhere (`declare=0`) refuses a channel-wide prefetch; the
/// consumer `App::consume` starts has a prefetch of its own (4 per handler slot), so the
/// runtime consumes it like any other queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_queue_provisioned_elsewhere_is_consumed_through_the_runtime() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let q = common::queue("quorum");
    let raw = Raw::new(&url).await;
    raw.declare_quorum(&q).await;
    let separator = if url.contains('?') { '&' } else { '?' };
    let transport = AmqpTransport::connect(&format!("{url}{separator}declare=0"))
        .await
        .unwrap();
    let handled = Arc::new(AtomicU64::new(0));
    let counted = handled.clone();
    let app = App::builder(transport.clone())
        .queue(&q)
        .concurrency(2)
        .poll_timeout(Duration::from_millis(500))
        .handle(URN, move |_ctx: Context| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    for i in 0..20 {
        app.publish(URN, &json!({ "i": i })).await.unwrap();
    }
    let summary = tokio::time::timeout(
        Duration::from_secs(30),
        app.consume(Consume::new().max_messages(20).handle_signals(false)),
    )
    .await
    .expect("the quorum queue was consumed")
    .unwrap();
    assert_eq!(summary.processed, 20, "{summary:?}");
    assert_eq!(handled.load(Ordering::SeqCst), 20);
    assert_eq!(transport.prefetch_of(&q), Some(8));
    transport.close().await.unwrap();
    raw.delete(&[&q]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqps_goes_through_rustls_and_fails_cleanly_against_a_plain_listener() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    // The local broker has no TLS listener: the handshake must fail as an error (no panic
    // about a missing rustls crypto provider), within the connection timeout.
    let tls = url
        .replacen("amqp://", "amqps://", 1)
        .replace("%2f", "%2f?connection_timeout=3000");
    let started = std::time::Instant::now();
    let err = AmqpTransport::connect(&tls).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_deleted_under_a_running_worker_is_declared_again_and_consumed() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    common::init_tracing();
    let q = common::queue("deleted");
    let raw = Raw::new(&url).await;
    let transport = AmqpTransport::connect(&url).await.unwrap();
    let handled = Arc::new(AtomicU64::new(0));
    let h = handled.clone();
    let worker = App::builder(transport.clone())
        .queue(&q)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, move |_ctx: Context| {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let stop = worker.stop_handle();
    let running =
        tokio::spawn(async move { worker.consume(Consume::new().handle_signals(false)).await });
    let producer = App::builder(transport.clone()).queue(&q).build().unwrap();
    producer.publish(URN, &json!({"n": 1})).await.unwrap();
    let wait = |n: u64| {
        let h = handled.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
            while h.load(Ordering::SeqCst) < n && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            h.load(Ordering::SeqCst)
        }
    };
    assert_eq!(wait(1).await, 1);
    raw.delete(&[&q]).await; // RabbitMQ cancels the worker's consumer
    // The publish finds the queue gone (a mandatory publish comes back unroutable), declares
    // it again and sends once more; the worker subscribes again and handles it.
    producer.publish(URN, &json!({"n": 2})).await.unwrap();
    assert_eq!(wait(2).await, 2);
    assert!(!running.is_finished());
    stop.stop();
    running.await.unwrap().unwrap();
    raw.delete(&[&q]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_dead_letter_write_acknowledges_nothing_and_the_message_comes_back() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    common::init_tracing();
    let q = common::queue("dlq-refused");
    let dlq = format!("{q}.dlq");
    let raw = Raw::new(&url).await;
    // Another framework owns a queue of the DLQ's name with different arguments: every
    // dead-letter write is refused.
    raw.declare_with_ttl(&dlq).await;
    let calls = Arc::new(AtomicU64::new(0));
    let worker = |transport: AmqpTransport| {
        let c = calls.clone();
        App::builder(transport)
            .queue(&q)
            .max_attempts(1)
            .dead_letter(true)
            .rewind_pause(Duration::from_millis(200))
            .poll_timeout(Duration::from_secs(2))
            .handle(URN, move |_ctx: Context| {
                let c = c.clone();
                async move {
                    c.fetch_add(1, Ordering::SeqCst);
                    Err::<(), _>(HandlerError::new("always fails"))
                }
            })
            .build()
            .unwrap()
    };
    let first = AmqpTransport::connect(&url).await.unwrap();
    let id = App::builder(first.clone())
        .queue(&q)
        .build()
        .unwrap()
        .publish(URN, &json!({"n": 1}))
        .await
        .unwrap();
    let summary = worker(first.clone())
        .consume(Consume::new().max_messages(2).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(
        summary.processed, 2,
        "handled twice: the refused write requeued it"
    );
    first.close().await.unwrap();
    assert_eq!(
        raw.wait_depth(&q, 1, Duration::from_secs(5)).await,
        1,
        "the message is still in its queue"
    );

    // Once the DLQ can be written, the next worker dead-letters it.
    raw.delete(&[&dlq]).await;
    let second = AmqpTransport::connect(&url).await.unwrap();
    worker(second)
        .consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    let records = raw.drain(&dlq).await;
    assert_eq!(records.len(), 1);
    assert_eq!(json(&records[0].0)["meta"]["id"], id.as_str());
    assert_eq!(raw.wait_depth(&q, 0, Duration::from_secs(5)).await, 0);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    raw.delete(&[&q, &dlq]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_and_unknown_vhosts_fail_at_connect() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let parsed = babelqueue_transport_amqp::AmqpUrl::parse(&url).unwrap();
    let authority = format!(
        "{}:{}",
        parsed.uri.authority.host, parsed.uri.authority.port
    );
    let user = &parsed.uri.authority.userinfo;
    let login = format!("{}:{}", user.username, user.password);
    for (bad, says) in [
        (
            format!("amqp://guest:wrong-password@{authority}/%2f"),
            "ACCESS_REFUSED",
        ),
        (
            format!("amqp://{login}@{authority}/no-such-vhost"),
            "vhost no-such-vhost not found",
        ),
    ] {
        let err = AmqpTransport::connect(&bad).await.unwrap_err();
        let text = err.to_string();
        assert!(
            !err.is_transient(),
            "a configuration error is not retried: {text}"
        );
        assert!(
            text.contains(says) && !text.contains("wrong-password"),
            "{text}"
        );
    }
    // The README's spelling, a trailing `/`, is the vhost `/` (lapin alone would ask for "").
    for good in [
        format!("amqp://{login}@{authority}/"),
        format!("amqp://{login}@{authority}"),
    ] {
        let transport = AmqpTransport::connect(&good).await.unwrap();
        transport.close().await.unwrap();
    }
}

/// The `amqps://` listener and its private CA (`scripts/brokers.sh env rabbitmq`), when the
/// listener answers; otherwise fails (BQ_REQUIRE_BROKERS set) or skips loudly.
async fn tls_broker() -> Option<(String, std::path::PathBuf)> {
    let url = std::env::var("BQ_AMQPS_URL")
        .unwrap_or_else(|_| "amqps://guest:guest@127.0.0.1:5671/%2f".to_owned());
    let ca = std::env::var_os("BQ_AMQP_TLS_CA").map_or_else(
        || {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../cache/brokers/rabbitmq/tls/ca.crt")
        },
        std::path::PathBuf::from,
    );
    let parsed = babelqueue_transport_amqp::AmqpUrl::parse(&url).expect("BQ_AMQPS_URL parses");
    let address = format!(
        "{}:{}",
        parsed.uri.authority.host, parsed.uri.authority.port
    );
    common::listening(
        &format!("the RabbitMQ amqps listener at {address}"),
        &address,
    )
    .await?;
    if ca.is_file() {
        return Some((url, ca));
    }
    babelqueue_testkit::skip_or_fail(format!(
        "the RabbitMQ amqps listener is not usable (its CA file {} is missing): `scripts/brokers.sh up rabbitmq`, then eval \"$(scripts/brokers.sh env rabbitmq)\"",
        ca.display()
    ));
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqps_with_a_private_ca_round_trips_and_is_refused_without_it() {
    let Some(url) = common::broker().await else {
        return;
    };
    let Some((tls_url, ca)) = tls_broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let q = common::queue("amqps");
    let raw = Raw::new(&url).await;

    let options = babelqueue_transport_amqp::AmqpOptions::default().ca_file(&ca);
    let transport = AmqpTransport::connect_with(&tls_url, options)
        .await
        .expect("amqps with the private CA connects");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = App::builder(transport.clone())
        .queue(&q)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, move |ctx: Context| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(ctx.data_as::<serde_json::Value>()?);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    app.publish(URN, &json!({"order_id": 5671})).await.unwrap();
    // the same broker sees it on its plain listener
    assert_eq!(raw.wait_depth(&q, 1, Duration::from_secs(5)).await, 1);
    let summary = app
        .consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, 1);
    assert_eq!(*seen.lock().unwrap(), vec![json!({"order_id": 5671})]);
    assert_eq!(raw.wait_depth(&q, 0, Duration::from_secs(5)).await, 0);
    transport.close().await.unwrap();

    // The same CA named by the URL query key every TLS transport shares.
    let sep = if tls_url.contains('?') { '&' } else { '?' };
    let by_url = AmqpTransport::connect(&format!("{tls_url}{sep}ca_file={}", ca.display()))
        .await
        .expect("amqps with ca_file= in the URL connects");
    by_url.close().await.unwrap();

    // Without the CA, the broker's certificate is refused during the handshake.
    let bounded = if tls_url.contains('?') {
        format!("{tls_url}&connection_timeout=3000")
    } else {
        format!("{tls_url}?connection_timeout=3000")
    };
    let started = std::time::Instant::now();
    let err = AmqpTransport::connect(&bounded).await.unwrap_err();
    let text = err.to_string();
    println!("refused without the CA: {text}");
    assert!(text.contains("certificate"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // A CA file that cannot be read is a configuration error, before any connection.
    let missing =
        babelqueue_transport_amqp::AmqpOptions::default().ca_file("/nonexistent/babelqueue-ca.pem");
    let err = AmqpTransport::connect_with(&tls_url, missing)
        .await
        .unwrap_err();
    assert!(!err.is_transient(), "{err}");
    assert!(
        err.to_string().contains("/nonexistent/babelqueue-ca.pem"),
        "{err}"
    );
    raw.delete(&[&q]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_published_in_order_with_its_confirms_in_flight_and_received_in_batches() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let q = common::queue("batch");
    let raw = Raw::new(&url).await;
    let transport = AmqpTransport::connect(&url).await.unwrap();
    // 2 500 bodies: three windows of confirms (1 024, 1 024, 452), every body byte for byte, in
    // order, with the contract properties a single publish would carry.
    let bodies: Vec<Vec<u8>> = (0..2_500)
        .map(|n| {
            Envelope::builder(URN)
                .queue(&q)
                .data(&json!({ "n": n }))
                .build()
                .unwrap()
                .encode()
                .unwrap()
                .into_bytes()
        })
        .collect();
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    let batch = transport
        .capabilities()
        .batch_publisher()
        .expect("BatchPublisher");
    batch.publish_batch(&q, &slices).await.unwrap();
    let on_wire = raw.drain(&q).await;
    assert_eq!(on_wire.len(), 2_500);
    for (n, (body, properties)) in on_wire.iter().enumerate() {
        assert_eq!(body, &bodies[n], "message {n} in order, byte for byte");
        let view = properties_json(properties);
        assert_eq!(
            (&view["properties"]["type"], &view["headers"]["x-attempts"]),
            (&json!(URN), &json!(0)),
            "message {n} carries the contract properties"
        );
    }

    // Received back through the transport: after the first, what the prefetch holds.
    batch.publish_batch(&q, &slices[..20]).await.unwrap();
    // Announced as the runtime does: what this loop holds at once (all 20, acknowledged at the
    // end). The prefetch is then the consumer's own and does not grow past it.
    transport.prepare_consume(&q, 20).await.unwrap();
    // The first receive subscribes; once the broker has pushed the window (a moment later),
    // the next receives hand out what the consumer holds, several at once, without waiting.
    // (Without the pause they may not: a receive no longer waits for a timer tick after its
    // first delivery, so a consumer faster than the socket takes them one by one.)
    let mut got = transport
        .receive(&q, 1, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut most = 0;
    while got.len() < 20 {
        let received = transport
            .receive(&q, 8, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(!received.is_empty(), "20 published, {} received", got.len());
        assert!(received.len() <= 8);
        most = most.max(received.len());
        got.extend(received);
    }
    assert!(most > 1, "never more than one per receive");
    for (n, delivery) in got.iter().enumerate() {
        assert_eq!(delivery.body(), bodies[n].as_slice());
        transport.ack(delivery).await.unwrap();
    }
}

/// A batch's in-order run goes out as one multiple-ack and a gapped one tag by tag: the
/// delivery held back in the middle is neither acknowledged by the run before it nor by the
/// acks after it, and comes back once the connection closes; the channel stays healthy
/// throughout (a wrong tag would close it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_acks_cover_the_in_order_run_only_and_the_held_delivery_comes_back() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let q = common::queue("multi-ack");
    let raw = Raw::new(&url).await;
    let transport = AmqpTransport::connect(&url).await.unwrap();
    for n in 0..10 {
        transport
            .publish(&q, format!("body {n}").as_bytes())
            .await
            .unwrap();
    }
    transport.prepare_consume(&q, 16).await.unwrap();
    let mut got: Vec<babelqueue_core::Delivery> = Vec::new();
    while got.len() < 10 {
        let received = transport
            .receive(&q, 10 - got.len(), Duration::from_secs(5))
            .await
            .unwrap();
        assert!(!received.is_empty(), "10 published, {} received", got.len());
        got.extend(received);
    }
    let acker = transport.capabilities().batch_acker().expect("BatchAcker");
    acker.ack_batch(&got[0..4]).await.unwrap();
    acker.ack_batch(&got[5..10]).await.unwrap();
    // The channel survived every frame: a later delivery is still acknowledged on it.
    transport.publish(&q, b"after").await.unwrap();
    let after = transport
        .receive(&q, 1, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].body(), b"after");
    acker.ack_batch(&after).await.unwrap();

    transport.close().await.unwrap();
    assert_eq!(raw.wait_depth(&q, 1, Duration::from_secs(5)).await, 1);
    let left: Vec<Vec<u8>> = raw.drain(&q).await.into_iter().map(|(b, _)| b).collect();
    assert_eq!(
        left,
        [got[4].body().to_vec()],
        "only the held delivery is back"
    );
    raw.delete(&[&q]).await;
}

/// `receive` asks the consumer for what it already holds with a zero timeout after every first
/// delivery. That ask must answer at once: as a tokio timer of zero it waited for the time
/// driver's next tick (up to a millisecond, more on a busy machine), which held every delivery
/// back before its handler started (the open-loop median was 1.1-1.5 ms against a bare lapin
/// loop's 0.4 ms). 200 asks on an empty consumer took at least 200 ms that way; without a
/// timer they take well under a millisecond each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asking_the_consumer_for_what_it_holds_does_not_wait_for_a_timer_tick() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let q = common::queue("zero-wait");
    let raw = Raw::new(&url).await;
    let transport = AmqpTransport::connect(&url).await.unwrap();
    transport
        .publish(&q, br#"{"job":"urn:babel:t","data":{}}"#)
        .await
        .unwrap();
    let first = transport
        .pop(&q, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the message published");
    let started = std::time::Instant::now();
    for _ in 0..200 {
        assert!(transport.pop(&q, Duration::ZERO).await.unwrap().is_none());
    }
    let took = started.elapsed();
    transport.ack(&first).await.unwrap();
    raw.delete(&[&q]).await;
    assert!(
        took < Duration::from_millis(100),
        "200 zero-timeout pops on an empty consumer took {took:?}: each waited for a timer"
    );
}
