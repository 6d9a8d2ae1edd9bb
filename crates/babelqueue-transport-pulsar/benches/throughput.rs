//! Messages per second of the Pulsar binding.
//!
//! `cargo bench -p babelqueue-transport-pulsar --bench throughput` prints:
//!
//! 1. criterion's figures for the binding with the runtime in front over the in-memory fake
//!    client (projection, consume rules, ack; no network), always;
//! 2. with a broker at `BQ_PULSAR_URL` (default `pulsar://127.0.0.1:6650`; start one with
//!    `scripts/brokers.sh up pulsar`): publish and consume messages/s of this crate against
//!    the real broker, and of the reference Python SDK (babelqueue 1.24.0 + pulsar-client, via
//!    `tests/python/driver.py` on `$BQ_PYTHON`) against the same broker, with the ratio.
//!    Publish figures are timed over 2 000 messages, consume figures over a backlog of 20 000
//!    (`BQ_BENCH_N`). Two bare loops give the ceiling: the `pulsar` crate's consumer (the `raw`
//!    row) and the C++ client the Python SDK wraps, driven from Python (printed, not a row).
//!    Both read a backlog published a few seconds earlier, as the SDKs do: the broker serves
//!    it from BookKeeper rather than from its entry cache, which it empties of entries older
//!    than a second by default.
//!
//!    Beside each consume rate, the consuming side's CPU-seconds per 1 000 messages (getrusage
//!    of this process around the consume phase; the Python SDK's own process's), as
//!    `BQ-FIGURE broker pulsar cpu <who> <s>`;
//! 3. with the broker, last, the open-loop publish-to-handled latency at each load of
//!    `babelqueue_testkit::OPEN_LOOP_LOADS`, this SDK with its defaults and the Python SDK
//!    (`xtask/bench/python_latency.py`), as `BQ-FIGURE latency pulsar` lines; each load twice,
//!    the sides' passes in turn, each side's better pass kept. `BQ_BENCH_ONLY=latency` runs only
//!    these rows.

#![allow(missing_docs, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use babelqueue_core::{App, BatchPublisher, Consume, Context, HandlerError, Transport};
use babelqueue_testkit::{
    OPEN_LOOP_LOADS, OPEN_LOOP_PASSES, OpenLoopRun, cpu_figure, cpu_time, open_loop,
    python_open_loop,
};
use babelqueue_transport_pulsar::fake::FakePulsar;
use babelqueue_transport_pulsar::{NativeClient, PulsarClient, PulsarOptions, PulsarTransport};
use criterion::{Criterion, Throughput};

const URN: &str = "urn:babel:orders:created";
const BATCH: u64 = 2_000;
/// Messages each live publish figure is timed over (the Python SDK publishes about 300/s, one
/// receipt at a time).
const LIVE: u64 = 2_000;
/// Messages each live consume figure is timed over, unless `BQ_BENCH_N` says otherwise: 2 000
/// took about 50 ms at concurrency 8, short enough for one pause of the shared machine to move
/// the ratio past its target either way.
const CONSUMED: u64 = 20_000;

fn consumed() -> u64 {
    std::env::var("BQ_BENCH_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n >= LIVE)
        .unwrap_or(CONSUMED)
}

/// Publishes `n` copies of `payload` in batches of 256 (`publish_batch`), untimed: the rest of
/// a consume figure's messages after its timed publish.
async fn fill(transport: &PulsarTransport, queue: &str, payload: &[u8], n: u64) {
    let batch = vec![payload; 256];
    let mut left = n;
    while left > 0 {
        let take = usize::try_from(left.min(256)).unwrap();
        transport
            .publish_batch(queue, &batch[..take])
            .await
            .unwrap();
        left -= take as u64;
    }
}

fn app(transport: PulsarTransport, queue: &str, concurrency: usize) -> App {
    App::builder(transport)
        .queue(queue)
        .concurrency(concurrency)
        .poll_timeout(Duration::from_secs(1))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .expect("valid configuration")
}

fn body(app: &App) -> Vec<u8> {
    app.envelope(URN)
        .data(&serde_json::json!({"order_id": 1042, "total": 99.9}))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

/// Consumes until `n` messages are processed (a `max_messages` run also ends on an empty poll,
/// which a broker pause such as a ledger roll-over can cause).
async fn consume(app: &App, n: u64) -> Duration {
    let started = Instant::now();
    let mut processed = 0;
    while processed < n {
        let summary = app
            .consume(
                Consume::new()
                    .max_messages(n - processed)
                    .handle_signals(false),
            )
            .await
            .unwrap();
        processed += summary.processed;
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "only {processed} of {n} consumed"
        );
    }
    started.elapsed()
}

fn per_second(n: u64, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

fn python() -> Option<PathBuf> {
    let path = std::env::var_os("BQ_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python"),
        PathBuf::from,
    );
    Command::new(&path)
        .args(["-c", "import babelqueue.pulsar_transport, pulsar"])
        .status()
        .is_ok_and(|s| s.success())
        .then_some(path)
}

/// Seconds the Python driver reports for `mode` over `n` messages.
fn python_seconds(python: &PathBuf, mode: &str, url: &str, queue: &str, n: u64) -> f64 {
    python_run(python, mode, url, queue, n).0
}

/// Seconds and, when it measured them, CPU-seconds the Python driver reports for `mode` over
/// `n` messages.
fn python_run(python: &PathBuf, mode: &str, url: &str, queue: &str, n: u64) -> (f64, Option<f64>) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/driver.py");
    let out = Command::new(python)
        .arg(script)
        .args([mode, url, queue, &n.to_string()])
        .output()
        .expect("the Python driver runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| {
            let seconds = v.get("seconds").and_then(serde_json::Value::as_f64)?;
            Some((seconds, v.get("cpu_s").and_then(serde_json::Value::as_f64)))
        })
        .expect("the driver reports seconds")
}

/// The raw client loop: a bare `pulsar` crate consumer (Shared subscription, its default
/// receiver queue), each message taken from the stream and acknowledged in turn, nothing
/// decoded. The messages are published first through `transport` (not timed); the rate is
/// timed from the first message; with the CPU time of the consuming part.
async fn raw(
    url: &str,
    transport: &PulsarTransport,
    queue: &str,
    payload: &[u8],
    n: u64,
) -> (f64, Duration) {
    use futures_util::StreamExt;
    let pulsar: pulsar::Pulsar<pulsar::TokioExecutor> =
        pulsar::Pulsar::builder(url, pulsar::TokioExecutor)
            .build()
            .await
            .unwrap();
    let mut consumer: pulsar::Consumer<Vec<u8>, pulsar::TokioExecutor> = pulsar
        .consumer()
        .with_topic(queue)
        .with_subscription("bench-raw")
        .with_subscription_type(pulsar::SubType::Shared)
        .build()
        .await
        .unwrap();
    fill(transport, queue, payload, n).await;
    let cpu = cpu_time();
    let mut started = None;
    for _ in 0..n {
        let message = consumer.next().await.unwrap().unwrap();
        started.get_or_insert_with(Instant::now);
        std::hint::black_box(&message.payload.data);
        consumer.ack(&message).await.unwrap();
    }
    let took = started.expect("a message came").elapsed();
    let cpu = cpu_time() - cpu;
    let _ = consumer.close().await;
    (per_second(n, took), cpu)
}

fn pulsar_url() -> String {
    std::env::var("BQ_PULSAR_URL").unwrap_or_else(|_| "pulsar://127.0.0.1:6650".into())
}

/// A client on the broker at [`pulsar_url`]; `None` (with a SKIPPED line) when unreachable.
fn connect(runtime: &tokio::runtime::Runtime) -> Option<Arc<NativeClient>> {
    let url = pulsar_url();
    let options = PulsarOptions {
        connect_timeout: Duration::from_secs(3),
        ..PulsarOptions::default()
    };
    match runtime.block_on(NativeClient::connect(&url, options)) {
        Ok(client) => Some(Arc::new(client)),
        Err(e) => {
            println!(
                "SKIPPED: pulsar not reachable at {url} ({e}); only the fake-client figures above"
            );
            None
        }
    }
}

/// The `pulsar` crate's producers spawn a task when dropped: close and drop inside the runtime.
fn close(runtime: &tokio::runtime::Runtime, client: Arc<NativeClient>) {
    runtime.block_on(async move {
        let _ = client.close().await;
        drop(client);
    });
}

/// The open-loop latency rows (this SDK with its defaults, then the Python SDK) at each load
/// of [`OPEN_LOOP_LOADS`], each pass on a topic of its own.
fn latency(runtime: &tokio::runtime::Runtime) {
    let Some(client) = connect(runtime) else {
        return;
    };
    let url = pulsar_url();
    let python = python();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    for (rate, duration) in OPEN_LOOP_LOADS {
        let (mut rust, mut py) = (None::<OpenLoopRun>, None::<OpenLoopRun>);
        for pass in 0..OPEN_LOOP_PASSES {
            let topic = format!("bench-open-{rate}-{pass}-{stamp}");
            let transport = PulsarTransport::with_client(client.clone());
            let run = runtime.block_on(open_loop(
                App::builder(transport).queue(topic),
                URN,
                rate,
                duration,
            ));
            OpenLoopRun::keep_better(&mut rust, run);
            let Some(python) = &python else { continue };
            let topic = format!("bench-open-py-{rate}-{pass}-{stamp}");
            match python_open_loop(python, &url, &topic, rate, duration) {
                Some(run) => OpenLoopRun::keep_better(&mut py, run),
                None => println!("pulsar: the Python SDK's open loop could not run (see above)"),
            }
        }
        for (who, run) in [("rust", rust), ("python", py)] {
            if let Some(run) = run {
                run.print("pulsar", who);
            }
        }
    }
    close(runtime, client);
}

fn live(runtime: &tokio::runtime::Runtime) {
    let url = pulsar_url();
    let Some(client) = connect(runtime) else {
        return;
    };
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let n = consumed();
    let mut rust = Vec::new();
    for concurrency in [1, 8] {
        let queue = format!("bench-rust-{concurrency}-{stamp}");
        let transport = PulsarTransport::with_client(client.clone());
        let app = app(transport.clone(), &queue, concurrency);
        let payload = body(&app);
        runtime.block_on(async {
            // subscribe first so nothing is skipped
            assert!(transport.pop(&queue, Duration::from_millis(100)).await.unwrap().is_none());
            // Concurrency 1 publishes one at a time, awaiting each receipt; concurrency 8 in
            // batches of 256 (`publish_batch`: a window of receipts in flight).
            let started = Instant::now();
            if concurrency == 1 {
                for _ in 0..LIVE {
                    transport.publish(&queue, &payload).await.unwrap();
                }
            } else {
                fill(&transport, &queue, &payload, LIVE).await;
            }
            let published = started.elapsed();
            fill(&transport, &queue, &payload, n - LIVE).await;
            let cpu = cpu_time();
            let consumed = consume(&app, n).await;
            let cpu = cpu_time() - cpu;
            println!("{}", cpu_figure("pulsar", &format!("rust-c{concurrency}"), cpu, n));
            let how = if concurrency == 1 {
                "awaiting each receipt"
            } else {
                "publish_batch by 256"
            };
            println!(
                "rust   pulsar publish ({how}): {LIVE} in {published:?} = {:.0} messages/s",
                per_second(LIVE, published)
            );
            println!(
                "rust   pulsar consume+ack, no-op handler, concurrency {concurrency}: {n} in {consumed:?} = {:.0} messages/s",
                per_second(n, consumed)
            );
            rust.push((per_second(LIVE, published), per_second(n, consumed)));
        });
    }
    let (raw_rate, raw_cpu) = runtime.block_on(async {
        let queue = format!("bench-raw-{stamp}");
        let transport = PulsarTransport::with_client(client.clone());
        let payload = body(&app(transport.clone(), &queue, 1));
        raw(&url, &transport, &queue, &payload, n).await
    });
    println!("raw    pulsar consume+ack (bare pulsar crate consumer): {raw_rate:.0} messages/s");
    println!("BQ-FIGURE broker pulsar consume raw {raw_rate:.0}");
    println!("{}", cpu_figure("pulsar", "raw", raw_cpu, n));
    let Some(python) = python() else {
        println!(
            "SKIPPED: the reference Python SDK with pulsar-client is not installed (scripts/brokers.sh up python pulsar)"
        );
        close(runtime, client);
        return;
    };
    let queue = format!("bench-python-{stamp}");
    let _ = python_seconds(&python, "publish", &url, &format!("{queue}-warm"), 1);
    // The Python consumer subscribes at the latest position: create its subscription first.
    let status = Command::new(&python)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/driver.py"))
        .args(["subscribe", &url, &queue])
        .output()
        .expect("the Python driver runs");
    assert!(status.status.success());
    let publish = python_seconds(&python, "publish", &url, &queue, LIVE);
    // The rest of the consumer's messages: the same envelope from this crate, untimed.
    runtime.block_on(async {
        let transport = PulsarTransport::with_client(client.clone());
        let payload = body(&app(transport.clone(), &queue, 1));
        fill(&transport, &queue, &payload, n - LIVE).await;
    });
    let (consume, python_cpu) = python_run(&python, "consume", &url, &queue, n);
    if let Some(spent) = python_cpu {
        let spent = Duration::from_secs_f64(spent.max(0.0));
        println!("{}", cpu_figure("pulsar", "python", spent, n));
    }
    let (py_pub, py_con) = (LIVE as f64 / publish, n as f64 / consume);
    println!(
        "python pulsar publish (babelqueue 1.24.0): {LIVE} in {publish:.3}s = {py_pub:.0} messages/s"
    );
    println!(
        "python pulsar consume+ack, no-op handler: {n} in {consume:.3}s = {py_con:.0} messages/s"
    );
    // The bare C++ client the Python SDK wraps, on a backlog of the same age: what the broker
    // itself gives any client here.
    let bare_queue = format!("bench-bare-{stamp}");
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/driver.py");
    let status = Command::new(&python)
        .arg(&driver)
        .args(["bare-subscribe", &url, &bare_queue])
        .output()
        .expect("the Python driver runs");
    assert!(status.status.success());
    runtime.block_on(async {
        let transport = PulsarTransport::with_client(client.clone());
        let payload = body(&app(transport.clone(), &bare_queue, 1));
        fill(&transport, &bare_queue, &payload, n).await;
    });
    let bare = n as f64 / python_seconds(&python, "bare-consume", &url, &bare_queue, n);
    println!(
        "bare   pulsar consume+ack (the C++ client pulsar-client, no SDK, from Python): {bare:.0} messages/s"
    );
    let (rust_pub, rust_con) = rust[0];
    println!(
        "ratio rust/python, same broker: publish {:.2}x, consume (concurrency 1) {:.2}x",
        rust_pub / py_pub,
        rust_con / py_con
    );
    for (who, (publish, consume)) in [
        ("rust-c1", rust[0]),
        ("rust-c8", rust[1]),
        ("python", (py_pub, py_con)),
    ] {
        println!("BQ-FIGURE broker pulsar publish {who} {publish:.0}");
        println!("BQ-FIGURE broker pulsar consume {who} {consume:.0}");
    }
    close(runtime, client);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if std::env::var("BQ_BENCH_ONLY").as_deref() == Ok("latency") {
        // Only the open-loop rows, for tuning and `perf record`.
        latency(&runtime);
        return;
    }
    if std::env::var_os("BQ_BENCH_FIGURES_ONLY").is_some() {
        // `cargo xtask bench brokers --broker pulsar`: the live side-by-side runs only.
        live(&runtime);
        latency(&runtime);
        return;
    }
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("pulsar_fake_client");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(10);
    group.bench_function("publish_then_consume_noop", |b| {
        b.to_async(&runtime).iter_custom(|iters| async move {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let fake = Arc::new(FakePulsar::new());
                let transport = PulsarTransport::with_client(fake);
                let app = app(transport.clone(), "orders", 1);
                let payload = body(&app);
                let started = Instant::now();
                for _ in 0..BATCH {
                    transport.publish("orders", &payload).await.unwrap();
                }
                consume(&app, BATCH).await;
                total += started.elapsed();
            }
            total
        });
    });
    group.finish();
    criterion.final_summary();

    if std::env::args().any(|a| a == "--bench") {
        let fake = Arc::new(FakePulsar::new());
        let transport = PulsarTransport::with_client(fake);
        let app = app(transport.clone(), "orders", 1);
        let payload = body(&app);
        let n = 20_000;
        let took = runtime.block_on(async {
            let started = Instant::now();
            for _ in 0..n {
                transport.publish("orders", &payload).await.unwrap();
            }
            consume(&app, n).await;
            started.elapsed()
        });
        println!(
            "binding + runtime over the fake client (no network): {n} published and consumed in {took:?} = {:.0} messages/s",
            per_second(n, took)
        );
        live(&runtime);
        latency(&runtime);
    }
}
