//! Messages per second on a real Artemis broker: the Rust worker (the runtime over
//! `ArtemisTransport`, a no-op handler, every message received, gated, reconciled, decoded,
//! routed, handled and accepted) against the Python SDK 1.24.0 worker on the same broker and
//! the same messages, and a raw fe2o3-amqp loop (receive and accept, credit 8).
//!
//! ```text
//! scripts/brokers.sh up artemis python
//! cargo bench -p babelqueue-transport-artemis --bench artemis
//! ```
//!
//! Criterion measures the Rust worker (concurrency 1); then one line per worker is printed:
//! `artemis <who>: N messages in T = R messages/s` (the median of 3 runs, and their range). `BQ_ARTEMIS_URL` names the broker,
//! `BQ_PYTHON` the reference SDK's interpreter, `BQ_BENCH_MESSAGES` the batch (default 2000).
//! Without a broker the bench prints `SKIPPED` (or fails when `BQ_REQUIRE_BROKERS` is set).
//!
//! Beside each consume rate, the consuming side's CPU-seconds per 1 000 messages (getrusage of
//! this process around the consume phase, the least of the runs; the Python SDK's own
//! process's), as `BQ-FIGURE broker artemis cpu <who> <s>`. Last, the open-loop
//! publish-to-handled latency at each load of `babelqueue_testkit::OPEN_LOOP_LOADS`, this SDK
//! with its defaults (receiver credit 1, growing with the concurrency) and the Python SDK
//! (`xtask/bench/python_latency.py`, credit 1), as `BQ-FIGURE latency artemis` lines; each load
//! twice, the sides' passes in turn, each side's better pass kept. `BQ_BENCH_ONLY=latency` runs
//! only the open-loop rows.

#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, Transport};
use babelqueue_envelope::Envelope;
use babelqueue_testkit::{
    OPEN_LOOP_LOADS, OPEN_LOOP_PASSES, OpenLoopRun, cpu_figure, cpu_time, open_loop,
    python_open_loop,
};
use babelqueue_transport_artemis::{ArtemisOptions, ArtemisTransport};
use criterion::{Criterion, Throughput};

const URN: &str = "urn:babel:orders:created";

fn url() -> String {
    std::env::var("BQ_ARTEMIS_URL").unwrap_or_else(|_| "artemis://bq:bq@127.0.0.1:5673".into())
}

fn messages() -> u64 {
    std::env::var("BQ_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn queue(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("bq-bench.{name}.{}.{nanos:x}", std::process::id())
}

fn body(queue: &str, n: u64) -> Vec<u8> {
    Envelope::builder(URN)
        .queue(queue)
        .data(&serde_json::json!({"order_id": n, "total": 99.9, "currency": "EUR"}))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

/// Publishes `n` envelopes to `queue`; returns how long it took.
async fn fill(t: &ArtemisTransport, queue: &str, n: u64) -> Duration {
    let started = Instant::now();
    for i in 0..n {
        t.publish(queue, &body(queue, i)).await.unwrap();
    }
    started.elapsed()
}

/// Publishes `n` envelopes to `queue` with `publish_batch`, 256 at a time; returns how long it
/// took.
async fn fill_batched(t: &ArtemisTransport, queue: &str, n: u64) -> Duration {
    use babelqueue_core::BatchPublisher as _;
    let bodies: Vec<Vec<u8>> = (0..n).map(|i| body(queue, i)).collect();
    let started = Instant::now();
    for chunk in bodies.chunks(256) {
        let slices: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        t.publish_batch(queue, &slices).await.unwrap();
    }
    started.elapsed()
}

/// Consumes `n` messages with a no-op handler; the clock runs from the first handler call to the
/// end of the loop (as the Python driver measures).
async fn consume(t: &ArtemisTransport, queue: &str, n: u64, concurrency: usize) -> Duration {
    let first: Arc<Mutex<Option<Instant>>> = Arc::default();
    let f = first.clone();
    let app = App::builder(t.clone())
        .queue(queue)
        .concurrency(concurrency)
        .handle(URN, move |_ctx: Context| {
            let f = f.clone();
            async move {
                f.lock().unwrap().get_or_insert_with(Instant::now);
                Ok::<(), HandlerError>(())
            }
        })
        .build()
        .unwrap();
    let summary = app
        .consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, n, "every message handled");
    let started = first.lock().unwrap().expect("a handler ran");
    started.elapsed()
}

/// The raw client loop: bare fe2o3-amqp, one receiver link on `queue` with 8 credits renewed
/// as messages come in (what the worker's link reaches at concurrency 8), each message received
/// and accepted in turn, nothing decoded. Timed from the first message, as the workers are.
async fn raw(url: &str, queue: &str, n: u64) -> Duration {
    use fe2o3_amqp::link::receiver::CreditMode;
    use fe2o3_amqp::sasl_profile::SaslProfile;
    use fe2o3_amqp::types::messaging::{Body, Source};
    use fe2o3_amqp::types::primitives::{Symbol, Value};
    use fe2o3_amqp::{Connection, Receiver, Session};

    let options = ArtemisOptions::parse(url).unwrap();
    let stream = tokio::net::TcpStream::connect((options.host.as_str(), options.port))
        .await
        .unwrap();
    let _ = stream.set_nodelay(true);
    let profile = match &options.username {
        Some(user) => SaslProfile::Plain {
            username: user.clone(),
            password: options.password.clone().unwrap_or_default(),
        },
        None => SaslProfile::Anonymous,
    };
    let mut connection = Connection::builder()
        .container_id(queue)
        .hostname(options.host.as_str())
        .sasl_profile(profile)
        .scheme("amqp")
        .open_with_stream(stream)
        .await
        .unwrap();
    let mut session = Session::begin(&mut connection).await.unwrap();
    let mut source = Source::builder().address(queue);
    if options.queue_capability {
        source = source.capabilities(vec![Symbol::from("queue")]);
    }
    let mut receiver = Receiver::builder()
        .name(format!("{queue}-raw"))
        .source(source.build())
        .credit_mode(CreditMode::Auto(8))
        .auto_accept(false)
        .attach(&mut session)
        .await
        .unwrap();
    let mut started = None;
    for _ in 0..n {
        let delivery = receiver.recv::<Body<Value>>().await.unwrap();
        started.get_or_insert_with(Instant::now);
        std::hint::black_box(delivery.body());
        receiver.accept(&delivery).await.unwrap();
    }
    let elapsed = started.expect("a message came").elapsed();
    let _ = receiver.close().await;
    let _ = session.end().await;
    let _ = connection.close().await;
    elapsed
}

fn python() -> Option<PathBuf> {
    let path = std::env::var_os("BQ_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python"),
        PathBuf::from,
    );
    path.exists().then_some(path)
}

fn python_driver(python: &PathBuf, args: &[&str]) -> serde_json::Value {
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/artemis_driver.py");
    let output = std::process::Command::new(python)
        .arg(driver)
        .args(args)
        .output()
        .expect("run the Python driver");
    assert!(
        output.status.success(),
        "python {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap()
}

const ROUNDS: usize = 3;

/// One line: the median run as messages/s, and the range over the runs; with `figure`
/// (`phase who`), also a `BQ-FIGURE broker artemis <phase> <who> <msg/s>` line.
fn report(who: &str, n: u64, mut runs: Vec<Duration>, figure: Option<&str>) {
    runs.sort();
    let rate = |d: &Duration| n as f64 / d.as_secs_f64();
    let median = runs[runs.len() / 2];
    println!(
        "artemis {who}: {n} messages in {median:.2?} = {:.0} messages/s (runs: {:.0}..{:.0} messages/s)",
        rate(&median),
        rate(runs.last().unwrap()),
        rate(&runs[0]),
    );
    if let Some(figure) = figure {
        println!("BQ-FIGURE broker artemis {figure} {:.0}", rate(&median));
    }
}

fn with_option(url: &str, option: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{option}")
}

fn reachable(url: &str) -> bool {
    let Ok(config) = ArtemisOptions::parse(url) else {
        return false;
    };
    std::net::TcpStream::connect_timeout(
        &match std::net::ToSocketAddrs::to_socket_addrs(&(config.host.as_str(), config.port))
            .ok()
            .and_then(|mut a| a.next())
        {
            Some(addr) => addr,
            None => return false,
        },
        Duration::from_secs(2),
    )
    .is_ok()
}

fn main() {
    let url = url();
    if !reachable(&url) {
        if std::env::var_os("BQ_REQUIRE_BROKERS").is_some() {
            panic!("artemis is not reachable at {url} and BQ_REQUIRE_BROKERS is set");
        }
        println!("SKIPPED: artemis not reachable at {url}");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let transport = runtime.block_on(ArtemisTransport::connect(&url)).unwrap();

    if std::env::var("BQ_BENCH_ONLY").as_deref() == Ok("latency") {
        // Only the open-loop rows, for tuning and `perf record`.
        latency(&runtime, &url);
        return;
    }
    let figures_only = std::env::var_os("BQ_BENCH_FIGURES_ONLY").is_some();
    if !figures_only {
        criterion_runs(&runtime, &transport);
    }
    if figures_only || std::env::args().any(|a| a == "--bench") {
        figures(&runtime, &transport, &url);
        latency(&runtime, &url);
    }
}

/// The open-loop latency rows (this SDK with its defaults, then the Python SDK) at each load
/// of [`OPEN_LOOP_LOADS`], each pass on a queue of its own.
fn latency(runtime: &tokio::runtime::Runtime, url: &str) {
    for (rate, duration) in OPEN_LOOP_LOADS {
        let (mut rust, mut py) = (None::<OpenLoopRun>, None::<OpenLoopRun>);
        for _ in 0..OPEN_LOOP_PASSES {
            // The transport is dropped, not closed: after a load that was not sustained some
            // publishes are still in flight, and closing would fail them.
            let run = runtime.block_on(async {
                let transport = ArtemisTransport::connect(url)
                    .await
                    .expect("Artemis is reachable");
                open_loop(
                    App::builder(transport).queue(queue("open")),
                    URN,
                    rate,
                    duration,
                )
                .await
            });
            OpenLoopRun::keep_better(&mut rust, run);
            let Some(python) = python() else { continue };
            match python_open_loop(&python, url, &queue("open-py"), rate, duration) {
                Some(run) => OpenLoopRun::keep_better(&mut py, run),
                None => println!("artemis: the Python SDK's open loop could not run (see above)"),
            }
        }
        for (who, run) in [("rust", rust), ("python", py)] {
            if let Some(run) = run {
                run.print("artemis", who);
            }
        }
    }
}

fn criterion_runs(runtime: &tokio::runtime::Runtime, transport: &ArtemisTransport) {
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let mut group = criterion.benchmark_group("artemis");
    const BATCH: u64 = 200;
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("rust_worker_concurrency_1", |b| {
        b.to_async(runtime).iter_custom(|iters| {
            let t = transport.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let q = queue("criterion");
                    fill(&t, &q, BATCH).await;
                    total += consume(&t, &q, BATCH, 1).await;
                }
                total
            }
        });
    });
    group.finish();
    criterion.final_summary();
}

/// The side-by-side runs.
fn figures(runtime: &tokio::runtime::Runtime, transport: &ArtemisTransport, url: &str) {
    let n = messages();
    println!(
        "\nRust worker vs Python SDK 1.24.0 worker, {n} messages per run, {ROUNDS} runs each (median, min..max), same broker ({url}):"
    );
    let credit2 = runtime
        .block_on(ArtemisTransport::connect(&with_option(url, "credit=2")))
        .unwrap();
    runtime.block_on(async {
        // Warm up the connection and the broker's JIT.
        let warm = queue("warm");
        fill(transport, &warm, 500).await;
        consume(transport, &warm, 500, 1).await;

        let mut publish = Vec::new();
        let mut publish_batched = Vec::new();
        let mut c1 = Vec::new();
        let mut c1_credit2 = Vec::new();
        let mut c8 = Vec::new();
        let mut bare = Vec::new();
        // The least CPU of each side's runs (other work on the machine only ever adds to it).
        let mut cpu: Vec<(&str, Duration)> = Vec::new();
        let mut least =
            |who: &'static str, spent: Duration| match cpu.iter_mut().find(|(w, _)| *w == who) {
                Some((_, d)) => *d = (*d).min(spent),
                None => cpu.push((who, spent)),
            };
        for _ in 0..ROUNDS {
            let q = queue("rust-c1");
            publish.push(fill(transport, &q, n).await);
            let before = cpu_time();
            c1.push(consume(transport, &q, n, 1).await);
            least("rust-c1", cpu_time() - before);
            let q = queue("rust-c1-credit2");
            fill(transport, &q, n).await;
            c1_credit2.push(consume(&credit2, &q, n, 1).await);
            let q = queue("rust-c8");
            publish_batched.push(fill_batched(transport, &q, n).await);
            let before = cpu_time();
            c8.push(consume(transport, &q, n, 8).await);
            least("rust-c8", cpu_time() - before);
            let q = queue("raw");
            fill(transport, &q, n).await;
            let before = cpu_time();
            bare.push(raw(url, &q, n).await);
            least("raw", cpu_time() - before);
        }
        report(
            "publish, Rust (one at a time, each accepted)",
            n,
            publish,
            Some("publish rust-c1"),
        );
        report(
            "publish, Rust (publish_batch by 256, a window of transfers in flight)",
            n,
            publish_batched,
            Some("publish rust-c8"),
        );
        report(
            "worker, Rust, concurrency 1 (credit 1)",
            n,
            c1,
            Some("consume rust-c1"),
        );
        report(
            "worker, Rust, concurrency 1, credit=2 (one prefetched)",
            n,
            c1_credit2,
            None,
        );
        report(
            "worker, Rust, concurrency 8 (credit follows: 8)",
            n,
            c8,
            Some("consume rust-c8"),
        );
        report(
            "raw fe2o3-amqp loop (credit 8, receive and accept each)",
            n,
            bare,
            Some("consume raw"),
        );
        for (who, spent) in &cpu {
            println!(
                "artemis {who}: {:.1} µs CPU per message consumed (least of the runs)",
                spent.as_secs_f64() * 1e6 / n as f64
            );
            println!("{}", cpu_figure("artemis", who, *spent, n));
        }
    });
    match python() {
        None => println!("SKIPPED: the Python SDK (BQ_PYTHON) is missing; no Python figures"),
        Some(py) => {
            let data = r#"{"order_id":1,"total":99.9,"currency":"EUR"}"#;
            let mut publish = Vec::new();
            let mut work = Vec::new();
            let mut cpu: Option<f64> = None;
            for _ in 0..ROUNDS {
                let q = queue("python");
                let out = python_driver(&py, &["publish", url, &q, URN, &n.to_string(), data]);
                publish.push(Duration::from_secs_f64(
                    out["seconds"].as_f64().unwrap_or(f64::NAN),
                ));
                let out = python_driver(&py, &["bench-consume", url, &q, &n.to_string(), URN]);
                assert_eq!(
                    out["messages"].as_u64(),
                    Some(n),
                    "the Python worker handled every message: {out}"
                );
                work.push(Duration::from_secs_f64(
                    out["seconds"].as_f64().unwrap_or(f64::NAN),
                ));
                if let Some(spent) = out["cpu_s"].as_f64() {
                    cpu = Some(cpu.map_or(spent, |c: f64| c.min(spent)));
                }
            }
            report(
                "publish, Python SDK (one at a time)",
                n,
                publish,
                Some("publish python"),
            );
            report(
                "worker, Python SDK (credit 1)",
                n,
                work,
                Some("consume python"),
            );
            if let Some(spent) = cpu {
                let spent = Duration::from_secs_f64(spent.max(0.0));
                println!(
                    "artemis python: {:.1} µs CPU per message consumed (least of the runs)",
                    spent.as_secs_f64() * 1e6 / n as f64
                );
                println!("{}", cpu_figure("artemis", "python", spent, n));
            }
        }
    }
}
