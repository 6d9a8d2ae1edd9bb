//! Publish + consume + ack throughput on a real RabbitMQ, three ways, with the ratios:
//!
//! * the Rust worker: `App` over `AmqpTransport` (every publish confirmed: at concurrency 1,
//!   64 `App::publish` calls in flight at once; at concurrency 8, `App::publish_batch` by 1 024;
//!   the default prefetch of 4 deliveries per handler slot, and once more at concurrency 8 with
//!   `.prefetch(8)`, the opt-out (`BQ_BENCH_PREFETCH` sets another window for that row);
//!   each message classified, decoded, routed, handled and acked);
//! * the reference Python SDK 1.24.0 (`BabelQueue` over pika: unconfirmed publishes, a
//!   `basic_get` per message), through `tests/python/bq_amqp.py bench`;
//! * a bare lapin loop with the same publisher confirms (1 024 in flight, as `publish_batch`
//!   keeps) and the same prefetch (4 and 32, the consumer's own, as lapin's default `basic_qos`
//!   options give), an ack per delivery, no envelope work at all: the
//!   ceiling the transport can approach; and once more (prefetch 32) sending the transport's
//!   own frames (its properties and headers, `mandatory`), which separates what the broker
//!   spends on the BabelQueue wire format from what the SDK spends.
//!
//! Beside each consume rate, the consuming side's CPU-seconds per 1 000 messages (getrusage of
//! this process around the consume phase; the Python SDK's own process's), as `BQ-FIGURE
//! broker rabbitmq cpu <who> <s>`; last, the open-loop publish-to-handled latency at each load
//! of `babelqueue_testkit::OPEN_LOOP_LOADS`, this SDK with its defaults and the Python SDK
//! (`xtask/bench/python_latency.py`), as `BQ-FIGURE latency rabbitmq` lines (each load twice,
//! the sides' passes in turn, each side's better pass kept), and between them the same open
//! loop with nothing but lapin (the `raw` row: same body, durable queue, persistent messages,
//! each publish awaiting its confirm, `basic.consume` on its own connection with the SDK's
//! prefetch 4, an ack per delivery): the bound the broker and the machine set.
//! `BQ_BENCH_ONLY=latency` runs only the open-loop rows; `BQ_BENCH_RATE` keeps one load,
//! `BQ_BENCH_PASSES` sets the passes, `BQ_BENCH_NO_PYTHON=1` drops the Python SDK's row, and
//! `BQ_BENCH_RAW_VARIANTS=all` (or a comma list of names) adds the diagnostic raw rows of
//! `RawShape` and prints every pass.
//!
//! `cargo bench -p babelqueue-transport-amqp --bench amqp` runs criterion on the Rust worker
//! (skipped with `BQ_BENCH_FIGURES_ONLY=1`, as `cargo xtask bench brokers --broker amqp` runs
//! it) and then prints one messages/s line per loop and the ratios, and `BQ-FIGURE` lines (the
//! `raw` row is the bare lapin loop with prefetch 32) (`BQ_BENCH_N` messages per
//! run, default 5000). Under `cargo test` it runs a 50-message smoke pass of each loop.
//! Needs `BQ_AMQP_URL` (default the loopback broker) and `BQ_PYTHON` (default the project
//! venv); a missing broker fails when `BQ_REQUIRE_BROKERS` is set and is skipped otherwise.

#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, Headers};
use babelqueue_testkit::{
    OPEN_LOOP_LOADS, OPEN_LOOP_PASSES, OpenLoopRun, PythonPeer, cpu_figure, cpu_time,
    drive_open_loop, open_loop, open_loop_probe, python_open_loop,
};
use babelqueue_transport_amqp::{AmqpTransport, AmqpUrl};
use criterion::{Criterion, Throughput};
use futures_lite::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};

const URN: &str = "urn:babel:bench:ping";
/// Confirmed `App::publish` calls in flight at once (the unbatched Rust loop).
const WINDOW: u64 = 64;
/// Messages per `App::publish_batch` call, and confirms in flight in the bare lapin loop: the
/// transport's own window, so both loops keep the same number of confirms outstanding.
const BATCH_WINDOW: u64 = 1024;
/// The envelope the bare lapin loops publish, the same bytes every time.
const RAW_BODY: &[u8] = br#"{"job":"urn:babel:bench:ping","trace_id":"00000000-0000-4000-8000-000000000000","data":{"i":0,"total":99.9},"meta":{"id":"00000000-0000-4000-8000-000000000001","queue":"bench","lang":"rust","schema_version":1,"created_at":1749132727000},"attempts":0}"#;

fn url() -> String {
    std::env::var("BQ_AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

fn queue(kind: &str) -> String {
    format!("bq-bench-{kind}-{:08x}", fastrand::u32(..))
}

fn reachable(url: &str) -> bool {
    let parsed = AmqpUrl::parse(url).expect("BQ_AMQP_URL parses");
    let address = format!(
        "{}:{}",
        parsed.uri.authority.host, parsed.uri.authority.port
    );
    std::net::ToSocketAddrs::to_socket_addrs(&address.as_str())
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
}

/// Timings of one run: publishing N, then consuming (and acking) N.
#[derive(Debug, Clone, Copy)]
struct Run {
    n: u64,
    publish: Duration,
    consume: Duration,
    /// The consuming side's CPU time over the consume phase, when measured.
    cpu: Option<Duration>,
}

impl Run {
    fn total_rate(&self) -> f64 {
        self.n as f64 / (self.publish + self.consume).as_secs_f64()
    }
    fn line(&self, name: &str) -> String {
        format!(
            "{name:<44} {n} messages: publish {p:>8.0}/s, consume+ack {c:>8.0}/s, publish+consume+ack {t:>8.0} messages/s",
            n = self.n,
            p = self.n as f64 / self.publish.as_secs_f64(),
            c = self.n as f64 / self.consume.as_secs_f64(),
            t = self.total_rate()
        )
    }
}

/// `prefetch`: deliveries held beyond the handlers in flight (`None`: the default, as many as
/// `concurrency`).
async fn rust_worker(
    transport: &AmqpTransport,
    n: u64,
    concurrency: usize,
    prefetch: Option<usize>,
    batched: bool,
) -> Run {
    let q = queue("rust");
    let builder = App::builder(transport.clone())
        .queue(&q)
        .concurrency(concurrency)
        .poll_timeout(Duration::from_secs(2))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) });
    let app = match prefetch {
        Some(prefetch) => builder.prefetch(prefetch),
        None => builder,
    }
    .build()
    .expect("valid configuration");
    let started = Instant::now();
    // Batched: App::publish_batch by BATCH_WINDOW (one window of confirms in flight per call).
    let mut sent = if batched { n } else { 0 };
    let mut left = if batched { n } else { 0 };
    while left > 0 {
        let take = left.min(BATCH_WINDOW);
        let batch: Vec<babelqueue_core::Envelope> = (0..take)
            .map(|i| {
                app.envelope(URN)
                    .data(&serde_json::json!({"i": i, "total": 99.9}))
                    .build()
                    .expect("an envelope")
            })
            .collect();
        app.publish_batch(&q, &batch).await.expect("publish_batch");
        left -= take;
    }
    // Else up to WINDOW confirmed publishes in flight, as a producer with concurrent requests
    // has.
    while sent < n {
        let batch = WINDOW.min(n - sent);
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..batch {
            let app = app.clone();
            tasks.spawn(async move {
                app.publish(URN, &serde_json::json!({"i": sent + i, "total": 99.9}))
                    .await
                    .expect("publish")
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("publish task");
        }
        sent += batch;
    }
    let (published, cpu) = (Instant::now(), cpu_time());
    let summary = app
        .consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .expect("consume");
    let (consumed, cpu) = (Instant::now(), cpu_time() - cpu);
    assert_eq!(summary.processed, n);
    delete(&q).await;
    Run {
        n,
        publish: published - started,
        consume: consumed - published,
        cpu: Some(cpu),
    }
}

/// Idle-to-handled latency (the testkit's helper): the median over 31 messages.
async fn idle_latency(transport: &AmqpTransport) -> Duration {
    let q = queue("idle");
    let builder = App::builder(transport.clone())
        .queue(&q)
        .poll_timeout(Duration::from_secs(1));
    let median = babelqueue_testkit::idle_to_handled(builder, URN, 31).await;
    delete(&q).await;
    median
}

async fn delete(q: &str) {
    if let Ok(c) = connect().await
        && let Ok(ch) = c.create_channel().await
    {
        let _ = ch
            .queue_delete(q.into(), QueueDeleteOptions::default())
            .await;
        let _ = c.close(200, "bench done".into()).await;
    }
}

async fn connect() -> lapin::Result<Connection> {
    let uri = AmqpUrl::parse(&url()).expect("url").uri;
    Connection::connect_uri(uri, ConnectionProperties::default()).await
}

/// What the bare lapin loop publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frames {
    /// A content type and persistence: the least a durable publish needs.
    Plain,
    /// The frames the transport sends: its properties and headers for the envelope
    /// (`projection::properties`) and the `mandatory` flag, so that the broker's own cost of
    /// the BabelQueue wire format is measured apart from the SDK's.
    Sdk,
}

/// The same work with nothing but lapin: confirmed publishes (`BATCH_WINDOW` in flight), a
/// consumer with the same prefetch, an ack per message.
async fn bare_lapin(n: u64, prefetch: u16, frames: Frames) -> Run {
    let q = queue("lapin");
    let connection = connect().await.expect("connect");
    let publisher = connection.create_channel().await.unwrap();
    publisher
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    publisher
        .queue_declare(
            q.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let body = RAW_BODY;
    let properties = match frames {
        Frames::Plain => BasicProperties::default()
            .with_content_type("application/json".into())
            .with_delivery_mode(2),
        Frames::Sdk => babelqueue_transport_amqp::projection::properties(body, &Headers::new())
            .expect("the transport's properties"),
    };
    let options = BasicPublishOptions {
        mandatory: frames == Frames::Sdk,
        ..BasicPublishOptions::default()
    };
    let started = Instant::now();
    let mut sent = 0;
    while sent < n {
        let batch = BATCH_WINDOW.min(n - sent);
        let mut confirms = Vec::new();
        for _ in 0..batch {
            confirms.push(
                publisher
                    .basic_publish(
                        "".into(),
                        q.as_str().into(),
                        options,
                        body,
                        properties.clone(),
                    )
                    .await
                    .unwrap(),
            );
        }
        for confirm in confirms {
            assert!(confirm.await.unwrap().is_ack());
        }
        sent += batch;
    }
    let (published, cpu) = (Instant::now(), cpu_time());
    let consumer_channel = connection.create_channel().await.unwrap();
    consumer_channel
        .basic_qos(prefetch, BasicQosOptions::default())
        .await
        .unwrap();
    let mut consumer = consumer_channel
        .basic_consume(
            q.as_str().into(),
            "bench".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut got = 0;
    while got < n {
        let delivery = consumer.next().await.expect("a delivery").expect("ok");
        delivery.ack(BasicAckOptions::default()).await.unwrap();
        got += 1;
    }
    let (consumed, cpu) = (Instant::now(), cpu_time() - cpu);
    let _ = publisher
        .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
        .await;
    let _ = connection.close(200, "bench done".into()).await;
    Run {
        n,
        publish: published - started,
        consume: consumed - published,
        cpu: Some(cpu),
    }
}

/// Publishing at the Python SDK's durability: persistent messages on a durable queue, no
/// publisher confirms, nothing else. Two rates: until the last frame is sent (what the Python
/// SDK's publish figure times) and until the queue holds all `n` (the broker has taken them
/// in, which no confirm tells). The first is the most a publisher without confirms gets here,
/// measured as the Python SDK is: the ceiling of the "times the Python SDK" publish ratio.
async fn bare_lapin_unconfirmed(n: u64) -> (f64, f64) {
    let q = queue("lapin-unconfirmed");
    let connection = connect().await.expect("connect");
    let channel = connection.create_channel().await.unwrap();
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    channel
        .queue_declare(q.as_str().into(), durable, FieldTable::default())
        .await
        .unwrap();
    let body = RAW_BODY;
    let properties = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_delivery_mode(2);
    let started = Instant::now();
    for _ in 0..n {
        // Without confirm mode the returned confirmation resolves at once, as NotRequested.
        let confirmation = channel
            .basic_publish(
                "".into(),
                q.as_str().into(),
                BasicPublishOptions::default(),
                body,
                properties.clone(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        assert!(!confirmation.is_ack() && !confirmation.is_nack());
    }
    let sent = n as f64 / started.elapsed().as_secs_f64();
    let passive = QueueDeclareOptions {
        passive: true,
        ..durable
    };
    loop {
        let state = channel
            .queue_declare(q.as_str().into(), passive, FieldTable::default())
            .await
            .unwrap();
        if u64::from(state.message_count()) >= n {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the broker took {} of {n} in 2 minutes",
            state.message_count()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let taken = n as f64 / started.elapsed().as_secs_f64();
    let _ = channel
        .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
        .await;
    let _ = connection.close(200, "bench done".into()).await;
    (sent, taken)
}

fn python_sdk(n: u64) -> Run {
    let python = std::env::var_os("BQ_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python"),
        PathBuf::from,
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/bq_amqp.py");
    let q = queue("python");
    let out = Command::new(&python)
        .arg(&script)
        .args(["bench", &url().replace("%2f", "%2F"), &q, &n.to_string()])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run the Python SDK at {} ({e}); set BQ_PYTHON",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "the Python benchmark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("the driver prints JSON");
    assert_eq!(
        v["n"].as_u64(),
        Some(n),
        "the Python worker handled every message"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(delete(&q));
    Run {
        n,
        publish: Duration::from_secs_f64(v["publish_s"].as_f64().unwrap()),
        consume: Duration::from_secs_f64(v["consume_s"].as_f64().unwrap()),
        cpu: v["consume_cpu_s"].as_f64().map(Duration::from_secs_f64),
    }
}

fn main() {
    let url = url();
    if !reachable(&url) {
        if std::env::var_os("BQ_REQUIRE_BROKERS").is_some() {
            panic!("RabbitMQ is not reachable at {url} and BQ_REQUIRE_BROKERS is set");
        }
        println!("SKIPPED: rabbitmq not reachable at {url}; the AMQP benchmark did not run");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let transport = runtime
        .block_on(AmqpTransport::connect(&url))
        .expect("connect");
    let figures_only = std::env::var_os("BQ_BENCH_FIGURES_ONLY").is_some();
    let benching = figures_only || std::env::args().any(|a| a == "--bench");
    if !benching {
        // `cargo test --benches`: a smoke pass that every loop still works.
        let rust = runtime.block_on(rust_worker(&transport, 50, 1, None, false));
        let lapin = runtime.block_on(bare_lapin(50, 1, Frames::Sdk));
        let python = python_sdk(50);
        for (name, run) in [("rust", rust), ("lapin", lapin), ("python", python)] {
            println!("{}", run.line(&format!("smoke: {name}")));
        }
        return;
    }

    if std::env::var("BQ_BENCH_ONLY").as_deref() == Ok("latency") {
        // Only the open-loop rows, for tuning and `perf record`.
        latency(&runtime, &transport);
        return;
    }
    if !figures_only {
        criterion_runs(&runtime, &transport);
    }
    figures(&runtime, &transport, &url);
}

fn criterion_runs(runtime: &tokio::runtime::Runtime, transport: &AmqpTransport) {
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("amqp_publish_consume_ack");
    const BATCH: u64 = 500;
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("rust_worker_concurrency_1", |b| {
        b.to_async(runtime).iter_custom(|iters| {
            let transport = transport.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let run = rust_worker(&transport, BATCH, 1, None, false).await;
                    total += run.publish + run.consume;
                }
                total
            }
        });
    });
    group.finish();
    criterion.final_summary();
}

/// The side-by-side runs, printed as lines and as `BQ-FIGURE broker rabbitmq …` figures.
fn figures(runtime: &tokio::runtime::Runtime, transport: &AmqpTransport, url: &str) {
    let n: u64 = std::env::var("BQ_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    println!();
    println!(
        "RabbitMQ {url}: {n} messages per run (each loop publishes all, then consumes and acks all); confirms in flight: {WINDOW} (concurrency 1), {BATCH_WINDOW} (publish_batch, bare lapin)"
    );
    // The SDK's default window is 4 deliveries per handler slot; the raw loops keep the same
    // window. `BQ_BENCH_PREFETCH` (default 8, the concurrency: the opt-out) sets the window of
    // the comparison row.
    let narrow: u16 = std::env::var("BQ_BENCH_PREFETCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let rust_1 = runtime.block_on(rust_worker(transport, n, 1, None, false));
    let lapin_1 = runtime.block_on(bare_lapin(n, 4, Frames::Plain));
    let rust_8 = runtime.block_on(rust_worker(transport, n, 8, None, true));
    let rust_8_narrow = runtime.block_on(rust_worker(
        transport,
        n,
        8,
        Some(usize::from(narrow)),
        true,
    ));
    let lapin_8 = runtime.block_on(bare_lapin(n, 32, Frames::Plain));
    let lapin_8_sdk = runtime.block_on(bare_lapin(n, 32, Frames::Sdk));
    let (unconfirmed, taken) = runtime.block_on(bare_lapin_unconfirmed(n));
    let python = python_sdk(n);
    println!(
        "{}",
        rust_1.line("rust worker (App + AmqpTransport), concurrency 1 (prefetch 4)")
    );
    println!("{}", lapin_1.line("bare lapin loop, confirms, prefetch 4"));
    println!(
        "{}",
        rust_8.line("rust worker, concurrency 8 (prefetch 32), publish_batch")
    );
    println!(
        "{}",
        rust_8_narrow.line(&format!(
            "rust worker, concurrency 8, .prefetch({narrow}), publish_batch"
        ))
    );
    println!("{}", lapin_8.line("bare lapin loop, confirms, prefetch 32"));
    println!(
        "{}",
        lapin_8_sdk.line("bare lapin loop, the SDK's frames (properties, mandatory), prefetch 32")
    );
    println!(
        "{}",
        python.line("python SDK 1.24.0 (pika, basic_get, no confirms)")
    );
    println!(
        "bare lapin publish, persistent, no confirms (the Python SDK's durability): {unconfirmed:.0} messages/s until the last is sent, {taken:.0} until the queue holds all"
    );
    println!("BQ-FIGURE broker rabbitmq publish raw-unconfirmed {unconfirmed:.0}");
    let ratio = |a: &Run, b: &Run| a.total_rate() / b.total_rate();
    println!(
        "ratio rust worker / python SDK (concurrency 1): {:.2}x",
        ratio(&rust_1, &python)
    );
    println!(
        "ratio rust worker / bare lapin (prefetch 4):    {:.2}x",
        ratio(&rust_1, &lapin_1)
    );
    println!(
        "ratio rust worker / bare lapin (prefetch 32):   {:.2}x",
        ratio(&rust_8, &lapin_8)
    );
    println!(
        "consume+ack only, rust worker / python SDK:     {:.2}x",
        (python.consume.as_secs_f64()) / (rust_1.consume.as_secs_f64())
    );
    let p50 = runtime.block_on(idle_latency(transport));
    println!(
        "rust worker idle-to-handled latency: {p50:.2?} at the median (publish confirmed first)"
    );
    println!(
        "BQ-FIGURE broker rabbitmq latency rust-c1 {}",
        p50.as_micros()
    );
    let narrow_row = format!("rust-c8-prefetch{narrow}");
    for (who, run) in [
        ("rust-c1", rust_1),
        ("rust-c8", rust_8),
        (narrow_row.as_str(), rust_8_narrow),
        ("raw", lapin_8),
        ("raw-sdk-frames", lapin_8_sdk),
        ("python", python),
    ] {
        let per = |d: Duration| run.n as f64 / d.as_secs_f64();
        println!(
            "BQ-FIGURE broker rabbitmq publish {who} {:.0}",
            per(run.publish)
        );
        println!(
            "BQ-FIGURE broker rabbitmq consume {who} {:.0}",
            per(run.consume)
        );
        if let Some(cpu) = run.cpu {
            println!("{}", cpu_figure("rabbitmq", who, cpu, run.n));
        }
    }
    latency(runtime, transport);
}

/// The open-loop latency rows at each load of [`OPEN_LOOP_LOADS`] (`BQ_BENCH_RATE` keeps one):
/// this SDK with its defaults, the bare lapin loop ([`raw_open_loop`]), then the Python SDK,
/// their passes taken in turn.
fn latency(runtime: &tokio::runtime::Runtime, transport: &AmqpTransport) {
    let python = PythonPeer::interpreter();
    let py_url = url().replace("%2f", "%2F");
    let only_rate: Option<u64> = std::env::var("BQ_BENCH_RATE")
        .ok()
        .and_then(|v| v.parse().ok());
    let passes: usize = std::env::var("BQ_BENCH_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(OPEN_LOOP_PASSES);
    for (rate, duration) in OPEN_LOOP_LOADS {
        if only_rate.is_some_and(|only| only != rate) {
            continue;
        }
        let (mut rust, mut raw, mut py) = (
            None::<OpenLoopRun>,
            None::<OpenLoopRun>,
            None::<OpenLoopRun>,
        );
        let wanted = std::env::var("BQ_BENCH_RAW_VARIANTS").ok();
        let variants: Vec<(&str, RawShape)> = if let Some(wanted) = &wanted {
            let all: Vec<(&str, RawShape)> = vec![
                (
                    "raw-one-connection",
                    RawShape {
                        one_connection: true,
                        ..RawShape::SDK
                    },
                ),
                (
                    "raw-no-confirms",
                    RawShape {
                        confirms: false,
                        ..RawShape::SDK
                    },
                ),
                (
                    "raw-transient",
                    RawShape {
                        persistent: false,
                        ..RawShape::SDK
                    },
                ),
                (
                    "sdk-consumer-raw-publisher",
                    RawShape {
                        sdk_consumer: true,
                        ..RawShape::SDK
                    },
                ),
                (
                    "raw-consumer-sdk-publisher",
                    RawShape {
                        sdk_publisher: true,
                        ..RawShape::SDK
                    },
                ),
            ];
            all.into_iter()
                .filter(|(name, _)| wanted == "all" || wanted.split(',').any(|w| w == *name))
                .collect()
        } else {
            Vec::new()
        };
        let mut varied: Vec<Option<OpenLoopRun>> = vec![None; variants.len()];
        for _ in 0..passes {
            let q = queue("open");
            let run = runtime.block_on(open_loop(
                App::builder(transport.clone()).queue(&q),
                URN,
                rate,
                duration,
            ));
            runtime.block_on(delete(&q));
            if wanted.is_some() {
                pass_line("rust", &run);
            }
            OpenLoopRun::keep_better(&mut rust, run);
            let q = queue("open-raw");
            let run = runtime.block_on(raw_open_loop(transport, &q, rate, duration, RawShape::SDK));
            runtime.block_on(delete(&q));
            if wanted.is_some() {
                pass_line("raw", &run);
            }
            OpenLoopRun::keep_better(&mut raw, run);
            for (i, (who, shape)) in variants.iter().enumerate() {
                let q = queue("open-raw-v");
                let run = runtime.block_on(raw_open_loop(transport, &q, rate, duration, *shape));
                runtime.block_on(delete(&q));
                pass_line(who, &run);
                OpenLoopRun::keep_better(&mut varied[i], run);
            }
            if std::env::var_os("BQ_BENCH_NO_PYTHON").is_none() {
                let q = queue("open-py");
                match python_open_loop(&python, &py_url, &q, rate, duration) {
                    Some(run) => OpenLoopRun::keep_better(&mut py, run),
                    None => {
                        println!("rabbitmq: the Python SDK's open loop could not run (see above)");
                    }
                }
                runtime.block_on(delete(&q));
            }
        }
        for (who, run) in [("rust", rust), ("raw", raw), ("python", py)] {
            if let Some(run) = run {
                run.print("rabbitmq", who);
            }
        }
        for ((who, _), run) in variants.iter().zip(varied) {
            if let Some(run) = run {
                run.print("rabbitmq", who);
            }
        }
    }
}

/// One pass's figures, in the diagnostic runs (`BQ_BENCH_RAW_VARIANTS`).
fn pass_line(who: &str, run: &OpenLoopRun) {
    println!(
        "pass {who}: p50 {} p99 {} p99.9 {} max {} µs, cpu {:.3} s/1000",
        run.percentile_us(0.5),
        run.percentile_us(0.99),
        run.percentile_us(0.999),
        run.histogram.max(),
        run.cpu_per_thousand().unwrap_or(0.0)
    );
}

/// How the raw open loop differs from the SDK's settings (all `false`/`true` as the SDK:
/// [`RawShape::SDK`]); the others are diagnostic rows (`BQ_BENCH_RAW_VARIANTS=1`).
#[derive(Debug, Clone, Copy)]
struct RawShape {
    /// Publisher and consumer channels on one connection (the SDK has one of each role).
    one_connection: bool,
    /// Publisher confirms (each publish awaits its own).
    confirms: bool,
    /// Persistent messages (delivery mode 2).
    persistent: bool,
    /// This SDK's consumer (the app's defaults) instead of lapin's.
    sdk_consumer: bool,
    /// This SDK's publisher (`App::publish`) instead of lapin's.
    sdk_publisher: bool,
}

impl RawShape {
    const SDK: RawShape = RawShape {
        one_connection: false,
        confirms: true,
        persistent: true,
        sdk_consumer: false,
        sdk_publisher: false,
    };
}

/// The envelope the raw open loop publishes around a stamped body: the shape `App::publish`
/// sends (the transport's properties are derived from it, as the SDK's are).
fn raw_envelope(queue: &str, data: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "job": URN,
        "trace_id": "00000000-0000-4000-8000-000000000000",
        "data": data,
        "meta": {
            "id": "00000000-0000-4000-8000-000000000001",
            "queue": queue,
            "lang": "rust",
            "schema_version": 1,
            "created_at": 1749132727000u64,
        },
        "attempts": 0,
    }))
    .expect("a JSON envelope")
}

/// The open loop with nothing but lapin, at the SDK's settings: a publishing connection
/// with a confirm-mode channel (every publish awaits its own confirm, `mandatory`, the
/// transport's properties: persistent), a consuming connection whose channel has the SDK's
/// default prefetch at concurrency 1 (4, the consumer's own), `basic.consume` with manual
/// acks, each delivery handled (its stamp read) and acked before the next is taken, as the
/// app does at concurrency 1. Same durable classic queue, same schedule and body
/// ([`drive_open_loop`]).
async fn raw_open_loop(
    transport: &AmqpTransport,
    q: &str,
    rate: u64,
    duration: Duration,
    shape: RawShape,
) -> OpenLoopRun {
    let publishing = connect().await.expect("connect");
    let own = if shape.one_connection {
        None
    } else {
        Some(connect().await.expect("connect"))
    };
    let consuming = own.as_ref().unwrap_or(&publishing);
    let publisher = publishing.create_channel().await.expect("a channel");
    if shape.confirms {
        publisher
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirm mode");
    }
    publisher
        .queue_declare(
            q.into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("declared");
    let (probe, handled) = open_loop_probe();
    // Diagnostic halves: this SDK's consumer (an app with the default settings, its handler
    // reporting to the probe) or its publisher (`App::publish`) in place of lapin's.
    let sdk_app = |probe: Option<babelqueue_testkit::OpenLoopProbe>| {
        App::builder(transport.clone())
            .queue(q)
            .handle(URN, move |ctx: Context| {
                if let Some(probe) = &probe {
                    match ctx.data_as::<serde_json::Value>() {
                        Ok(data) => probe.handled_data(&data),
                        Err(_) => probe.handled(None),
                    }
                }
                async { Ok::<(), HandlerError>(()) }
            })
            .build()
            .expect("a valid app")
    };
    let mut stop = None;
    let consuming_task = if shape.sdk_consumer {
        let app = sdk_app(Some(probe));
        stop = Some(app.stop_handle());
        tokio::spawn(async move {
            let _ = app.consume(Consume::new().handle_signals(false)).await;
        })
    } else {
        let channel = consuming.create_channel().await.expect("a channel");
        channel
            .basic_qos(4, BasicQosOptions { global: false })
            .await
            .expect("qos");
        let mut consumer = channel
            .basic_consume(
                q.into(),
                "bench-open".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("consume");
        tokio::spawn(async move {
            while let Some(Ok(delivery)) = consumer.next().await {
                let body: serde_json::Value =
                    serde_json::from_slice(&delivery.data).unwrap_or_default();
                probe.handled_data(&body["data"]);
                if delivery.ack(BasicAckOptions::default()).await.is_err() {
                    break;
                }
            }
        })
    };
    let sdk_publisher = shape.sdk_publisher.then(|| sdk_app(None));
    let queue = q.to_owned();
    let run = drive_open_loop(handled, rate, duration, move |data| {
        let (publisher, queue, app) = (publisher.clone(), queue.clone(), sdk_publisher.clone());
        async move {
            if let Some(app) = app {
                app.publish(URN, &data).await.expect("published");
                return;
            }
            let body = raw_envelope(&queue, &data);
            let mut properties =
                babelqueue_transport_amqp::projection::properties(&body, &Headers::new())
                    .expect("the transport's properties");
            if !shape.persistent {
                properties = properties.with_delivery_mode(1);
            }
            let options = BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            };
            let confirm = publisher
                .basic_publish("".into(), queue.as_str().into(), options, &body, properties)
                .await
                .expect("published")
                .await
                .expect("confirmed");
            assert!(
                confirm.is_ack() || !shape.confirms,
                "the broker confirmed the publish"
            );
        }
    })
    .await;
    match stop {
        Some(stop) => {
            stop.stop();
            let _ = tokio::time::timeout(Duration::from_secs(10), consuming_task).await;
        }
        None => consuming_task.abort(),
    }
    if let Some(own) = own {
        let _ = own.close(200, "bench done".into()).await;
    }
    let _ = publishing.close(200, "bench done".into()).await;
    run
}
