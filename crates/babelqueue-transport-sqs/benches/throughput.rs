//! Messages per second through a local SQS endpoint (moto's server, `scripts/brokers.sh up sqs`):
//! the Rust worker (the real `App` on `SqsTransport`, a no-op handler, every message received,
//! classified, decoded, routed, handled and deleted) and the reference Python SDK 1.24.0 doing
//! the same on the same server.
//!
//! ```text
//! cargo bench -p babelqueue-transport-sqs --bench throughput
//! ```
//!
//! prints criterion's figures for the Rust worker (on moto, and on the in-process `FakeSqs` to
//! show the transport's own cost), then one messages/s line per measurement: Rust publish, Rust
//! consume (concurrency 1; concurrency 8 with 8 messages per receive), and Python publish and
//! consume (`tests/python/sqs_peer.py` on `$BQ_PYTHON`). Each measurement runs in rounds of
//! `BQ_BENCH_BACKLOG` messages (default 100) on a fresh queue, `BQ_BENCH_MESSAGES` in all
//! (default 1000): moto's receive and delete scan the whole queue, so a deeper backlog only
//! measures moto. Under `cargo test` the benchmarks run once, briefly. Without the broker it
//! prints `SKIPPED` (or fails when `BQ_REQUIRE_BROKERS` is set).
//!
//! moto, not the SDK, bounds the rates; what the SDK controls is how many requests it makes.
//! The batched rounds count them (a counting [`SqsClient`] around the real one): `publish_batch`
//! of the round's messages (`SendMessageBatch` of 10) and a worker at concurrency 10 receiving
//! 10 per `ReceiveMessage` and deleting with `DeleteMessageBatch`, every request included (the
//! queue URL look-up, the last empty receive). Every figure is also a `BQ-FIGURE` line, which
//! `cargo xtask bench brokers --broker sqs` reads.
//!
//! Beside each consume rate, the consuming side's CPU-seconds per 1 000 messages (getrusage of
//! this process around the worker's consume, summed over the rounds; the Python SDK's own
//! process's), as `BQ-FIGURE broker sqs cpu <who> <s>` (`rust-c1`, `rust-c8`, `rust-c10`,
//! `python`; there is no raw client loop). Last, the open-loop publish-to-handled latency at
//! 10 and 100 msg/s (moto bounds the loads, see [`SQS_LOADS`]), this SDK
//! with its defaults (one message per receive, the long poll bounded by the app's 1 s poll
//! timeout) and the Python SDK (`xtask/bench/python_latency.py`), as `BQ-FIGURE latency sqs`
//! lines; each load twice, the sides' passes in turn, each side's better pass kept.
//! `BQ_BENCH_ONLY=latency` runs only the open-loop rows.

#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use babelqueue_core::{App, Consume, Context, HandlerError, Transport};
use babelqueue_testkit::{
    OPEN_LOOP_LOADS, OPEN_LOOP_PASSES, OpenLoopRun, cpu_figure, cpu_time, open_loop,
    python_open_loop,
};
use babelqueue_transport_sqs::aws_sdk_sqs;
use babelqueue_transport_sqs::{
    AwsSqs, ReceiveMessage, ReceivedMessage, SendMessage, SqsClient, SqsError, SqsOptions,
    SqsTransport,
};
use criterion::{Criterion, Throughput};

const URN: &str = "urn:babel:orders:created";
const CRITERION_BATCH: u64 = 100;
const FAKE_BATCH: u64 = 1000;

struct Bench {
    url: String,
    region: String,
    endpoint: String,
    sdk: aws_sdk_sqs::Client,
}

fn sdk(region: &str, endpoint: &str) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new(region.to_owned()))
            .endpoint_url(endpoint)
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "test", "test", None, None, "bench",
            ))
            .build(),
    )
}

impl Bench {
    fn from_env() -> Option<Bench> {
        let url = std::env::var("BQ_SQS_URL")
            .unwrap_or_else(|_| "sqs://us-east-1?endpoint=http://127.0.0.1:5000".to_owned());
        let config = SqsOptions::from_url(&url).expect("BQ_SQS_URL is a valid sqs:// URL");
        let endpoint = config
            .endpoint
            .clone()
            .expect("BQ_SQS_URL names an endpoint");
        let region = config.region.clone().unwrap_or_else(|| "us-east-1".into());
        let authority = endpoint
            .split("://")
            .nth(1)
            .unwrap_or(&endpoint)
            .trim_end_matches('/');
        let up = authority
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .is_some_and(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok());
        if !up {
            let what = format!("sqs not reachable at {endpoint}");
            if std::env::var_os("BQ_REQUIRE_BROKERS").is_some_and(|v| !v.is_empty()) {
                panic!("{what}, and BQ_REQUIRE_BROKERS is set: scripts/brokers.sh up sqs");
            }
            println!("SKIPPED: {what}; start it with scripts/brokers.sh up sqs");
            return None;
        }
        let sdk = sdk(&region, &endpoint);
        Some(Bench {
            url,
            region,
            endpoint,
            sdk,
        })
    }

    fn transport(&self, max_messages: usize) -> SqsTransport {
        let config = SqsOptions::from_url(&self.url)
            .expect("a valid URL")
            .max_messages(max_messages);
        SqsTransport::new(AwsSqs::new(sdk(&self.region, &self.endpoint)), config)
    }

    async fn queue(&self, label: &str) -> String {
        let name = format!(
            "bq-bench-{label}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        self.sdk
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .expect("create the benchmark queue");
        name
    }

    async fn delete_queue(&self, name: &str) {
        if let Ok(url) = self.sdk.get_queue_url().queue_name(name).send().await
            && let Some(url) = url.queue_url()
        {
            let _ = self.sdk.delete_queue().queue_url(url).send().await;
        }
    }
}

/// The real client, counting every request it makes.
#[derive(Debug)]
struct Counted {
    inner: AwsSqs,
    requests: Arc<AtomicU64>,
}

impl Counted {
    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl SqsClient for Counted {
    async fn get_queue_url(&self, name: &str) -> Result<String, SqsError> {
        self.count();
        self.inner.get_queue_url(name).await
    }
    async fn send_message(&self, request: SendMessage) -> Result<(), SqsError> {
        self.count();
        self.inner.send_message(request).await
    }
    async fn receive_message(
        &self,
        request: ReceiveMessage,
    ) -> Result<Vec<ReceivedMessage>, SqsError> {
        self.count();
        self.inner.receive_message(request).await
    }
    async fn delete_message(&self, queue_url: &str, receipt_handle: &str) -> Result<(), SqsError> {
        self.count();
        self.inner.delete_message(queue_url, receipt_handle).await
    }
    async fn change_message_visibility(
        &self,
        queue_url: &str,
        receipt_handle: &str,
        visibility_timeout: i32,
    ) -> Result<(), SqsError> {
        self.count();
        self.inner
            .change_message_visibility(queue_url, receipt_handle, visibility_timeout)
            .await
    }
    async fn send_message_batch(
        &self,
        queue_url: &str,
        requests: Vec<SendMessage>,
    ) -> Result<(), SqsError> {
        self.count();
        self.inner.send_message_batch(queue_url, requests).await
    }
    async fn delete_message_batch(
        &self,
        queue_url: &str,
        receipt_handles: Vec<String>,
    ) -> Result<(), SqsError> {
        self.count();
        self.inner
            .delete_message_batch(queue_url, receipt_handles)
            .await
    }
}

/// What a batched round did: its time, the requests it made, and (consuming) its CPU time.
struct Counting {
    took: Duration,
    requests: u64,
    cpu: Duration,
}

impl Bench {
    /// A transport on a counting client (10 messages per receive), and its counter.
    fn counted(&self) -> (SqsTransport, Arc<AtomicU64>) {
        let requests = Arc::new(AtomicU64::new(0));
        let config = SqsOptions::from_url(&self.url)
            .expect("a valid URL")
            .max_messages(10);
        let client = Counted {
            inner: AwsSqs::new(sdk(&self.region, &self.endpoint)),
            requests: requests.clone(),
        };
        (SqsTransport::new(client, config), requests)
    }
}

/// Publishes `n` messages with `App::publish_batch` (`SendMessageBatch` of 10), counted.
async fn rust_publish_batch(bench: &Bench, n: u64) -> Counting {
    let queue = bench.queue("rbat").await;
    let (transport, requests) = bench.counted();
    let app = App::builder(transport)
        .queue(queue.clone())
        .build()
        .unwrap();
    let data = serde_json::json!({"order_id": 1042, "total": 99.9});
    let envelopes: Vec<_> = (0..n)
        .map(|_| app.envelope(URN).data(&data).build().unwrap())
        .collect();
    let started = Instant::now();
    app.publish_batch(&queue, &envelopes).await.unwrap();
    let took = started.elapsed();
    bench.delete_queue(&queue).await;
    Counting {
        took,
        requests: requests.load(Ordering::Relaxed),
        cpu: Duration::ZERO,
    }
}

/// Fills a fresh queue with `n` messages, then a worker at concurrency 10 consumes them all
/// (10 per receive, batched deletes), counted.
async fn rust_consume_batched(bench: &Bench, n: u64) -> Counting {
    let queue = bench.queue("rbcon").await;
    fill(Arc::new(bench.transport(1)), &queue, n).await;
    let (transport, requests) = bench.counted();
    let (took, cpu) = timed_worker(bench, Arc::new(transport), &queue, n, 10).await;
    Counting {
        took,
        requests: requests.load(Ordering::Relaxed),
        cpu,
    }
}

fn envelope_body() -> String {
    babelqueue_core::Envelope::builder(URN)
        .queue("bench")
        .data(&serde_json::json!({"order_id": 1042, "total": 99.9}))
        .build()
        .unwrap()
        .encode()
        .unwrap()
}

/// Publishes `n` messages, 16 at a time (not timed).
async fn fill(transport: Arc<SqsTransport>, queue: &str, n: u64) {
    let body = envelope_body();
    let mut tasks = tokio::task::JoinSet::new();
    let per = n.div_ceil(16);
    for lane in 0..16 {
        let (transport, queue, body) = (transport.clone(), queue.to_owned(), body.clone());
        let count = per.min(n.saturating_sub(lane * per));
        tasks.spawn(async move {
            for _ in 0..count {
                transport.publish(&queue, body.as_bytes()).await.unwrap();
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Times publishing `n` messages one after the other.
async fn rust_publish(bench: &Bench, n: u64) -> Duration {
    let queue = bench.queue("rpub").await;
    let transport = bench.transport(1);
    let app = App::builder(transport)
        .queue(queue.clone())
        .build()
        .unwrap();
    let data = serde_json::json!({"order_id": 1042, "total": 99.9});
    let started = Instant::now();
    for _ in 0..n {
        app.publish(URN, &data).await.unwrap();
    }
    let took = started.elapsed();
    bench.delete_queue(&queue).await;
    took
}

/// Fills a fresh queue with `n` messages, then times a worker consuming them all; with its CPU
/// time.
async fn rust_consume(bench: &Bench, n: u64, concurrency: usize) -> (Duration, Duration) {
    let queue = bench.queue("rcon").await;
    let transport = Arc::new(bench.transport(concurrency));
    fill(transport.clone(), &queue, n).await;
    timed_worker(bench, transport, &queue, n, concurrency).await
}

/// Times a worker with a no-op handler at `concurrency` consuming the `n` messages of
/// `queue`, then deletes the queue; the time and this process's CPU time over the consume.
async fn timed_worker(
    bench: &Bench,
    transport: Arc<SqsTransport>,
    queue: &str,
    n: u64,
    concurrency: usize,
) -> (Duration, Duration) {
    let app = App::builder_arc(transport)
        .queue(queue)
        .concurrency(concurrency)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let (started, cpu) = (Instant::now(), cpu_time());
    let summary = app
        .consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .unwrap();
    let (took, cpu) = (started.elapsed(), cpu_time() - cpu);
    assert_eq!(summary.processed, n, "every message consumed");
    bench.delete_queue(queue).await;
    (took, cpu)
}

/// Times a worker consuming `n` messages from the in-process `FakeSqs`.
async fn fake_consume(n: u64) -> Duration {
    let fake = babelqueue_transport_sqs::fake::FakeSqs::new();
    let transport = SqsTransport::new(fake, SqsOptions::default());
    let body = envelope_body();
    for _ in 0..n {
        transport.publish("bench", body.as_bytes()).await.unwrap();
    }
    let app = App::builder(transport)
        .queue("bench")
        .poll_timeout(Duration::ZERO)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let started = Instant::now();
    let summary = app
        .consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, n);
    started.elapsed()
}

fn python() -> Option<PathBuf> {
    let path = std::env::var_os("BQ_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python")
        });
    path.exists().then_some(path)
}

/// Runs the Python peer and returns the seconds it measured for `n` messages, and the CPU
/// time it measured when it did (`bench-consume`).
async fn python_run(
    bench: &Bench,
    python: &PathBuf,
    command: &str,
    queue: &str,
    n: u64,
) -> (f64, Option<f64>) {
    let out = tokio::process::Command::new(python)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/sqs_peer.py"))
        .args([command, "--url", &bench.url, "--queue", queue, "--urn", URN])
        .args(["--count", &n.to_string()])
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_DEFAULT_REGION", &bench.region)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .await
        .expect("python starts");
    assert!(
        out.status.success(),
        "the Python peer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value =
        serde_json::from_slice(out.stdout.trim_ascii()).expect("one JSON line");
    assert_eq!(line["messages"].as_u64(), Some(n), "{line}");
    (
        line["seconds"].as_f64().expect("seconds"),
        line["cpu_s"].as_f64(),
    )
}

fn rate(n: u64, seconds: f64) -> String {
    format!(
        "{n} messages in {seconds:.2} s = {:.0} messages/s",
        n as f64 / seconds
    )
}

fn main() {
    let Some(bench) = Bench::from_env() else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // `BQ_BENCH_FIGURES_ONLY` (what `cargo xtask bench brokers` sets) skips criterion.
    let figures_only = std::env::var_os("BQ_BENCH_FIGURES_ONLY").is_some();
    if !figures_only {
        let mut criterion = Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(8))
            .configure_from_args();
        let mut group = criterion.benchmark_group("sqs_moto");
        group.throughput(Throughput::Elements(CRITERION_BATCH));
        for concurrency in [1, 8] {
            group.bench_function(
                format!("rust_consume_noop_concurrency_{concurrency}"),
                |b| {
                    b.to_async(&runtime).iter_custom(|iters| {
                        let bench = &bench;
                        async move {
                            let mut total = Duration::ZERO;
                            for _ in 0..iters {
                                total += rust_consume(bench, CRITERION_BATCH, concurrency).await.0;
                            }
                            total
                        }
                    });
                },
            );
        }
        group.finish();
        // The same worker over the in-process FakeSqs: the cost of the transport and the runtime
        // alone, without HTTP or a server.
        let mut group = criterion.benchmark_group("sqs_fake");
        group.throughput(Throughput::Elements(FAKE_BATCH));
        group.bench_function("rust_consume_noop_concurrency_1", |b| {
            b.to_async(&runtime)
                .iter_custom(|iters| async move { fake_consume(FAKE_BATCH * iters).await });
        });
        group.finish();
        criterion.final_summary();
    }

    if std::env::var("BQ_BENCH_ONLY").as_deref() == Ok("latency") {
        // Only the open-loop rows, for tuning and `perf record`.
        latency(&bench, &runtime);
        return;
    }
    if !(figures_only || std::env::args().any(|a| a == "--bench")) {
        return;
    }
    // moto scans a queue's whole list on every receive and delete, so a consumer's rate falls
    // with the backlog (O(n) per call). Every measurement therefore runs in rounds with the same
    // backlog (a fresh queue each round), for both SDKs.
    let setting = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    let backlog = setting("BQ_BENCH_BACKLOG", 100);
    let rounds = setting("BQ_BENCH_MESSAGES", 1000).div_ceil(backlog);
    let n = rounds * backlog;
    let shape = format!("{rounds} rounds of {backlog}");
    let python = python();
    if python.is_none() {
        println!("python: SKIPPED (no interpreter at $BQ_PYTHON / ../cache/venv/bin/python)");
    }
    // The machine is shared: the measurements are interleaved round by round, so a change of
    // load weighs on every one of them alike.
    let mut totals = [0.0_f64; 7];
    let mut requests = [0_u64; 2];
    // CPU time of the consume rounds, summed: rust-c1, rust-c8, rust-c10, python.
    let mut cpu = [Duration::ZERO; 4];
    let mut python_cpu = true;
    for _ in 0..rounds {
        let published = runtime.block_on(rust_publish_batch(&bench, backlog));
        totals[5] += published.took.as_secs_f64();
        requests[0] += published.requests;
        let consumed = runtime.block_on(rust_consume_batched(&bench, backlog));
        totals[6] += consumed.took.as_secs_f64();
        requests[1] += consumed.requests;
        cpu[2] += consumed.cpu;
        totals[0] += runtime
            .block_on(rust_publish(&bench, backlog))
            .as_secs_f64();
        let (took, spent) = runtime.block_on(rust_consume(&bench, backlog, 1));
        totals[1] += took.as_secs_f64();
        cpu[0] += spent;
        let (took, spent) = runtime.block_on(rust_consume(&bench, backlog, 8));
        totals[2] += took.as_secs_f64();
        cpu[1] += spent;
        let Some(python) = &python else { continue };
        totals[3] += runtime.block_on(async {
            let queue = bench.queue("ppub").await;
            let s = python_run(&bench, python, "bench-publish", &queue, backlog).await;
            bench.delete_queue(&queue).await;
            s.0
        });
        let (seconds, spent) = runtime.block_on(async {
            let queue = bench.queue("pcon").await;
            fill(Arc::new(bench.transport(1)), &queue, backlog).await;
            let s = python_run(&bench, python, "bench-consume", &queue, backlog).await;
            bench.delete_queue(&queue).await;
            s
        });
        totals[4] += seconds;
        match spent {
            Some(spent) => cpu[3] += Duration::from_secs_f64(spent.max(0.0)),
            None => python_cpu = false,
        }
    }
    let labels = [
        "rust   publish, one at a time         ",
        "rust   consume, concurrency 1, batch 1",
        "rust   consume, concurrency 8, batch 8",
        "python publish, one at a time         ",
        "python consume, one at a time         ",
        "rust   publish_batch (10 per request) ",
        "rust   consume, concurrency 10, batch 10",
    ];
    let keys = [
        "rust_publish",
        "rust_consume_c1",
        "rust_consume_c8",
        "python_publish",
        "python_consume",
        "rust_publish_batch",
        "rust_consume_c10",
    ];
    for ((label, key), seconds) in labels.iter().zip(keys).zip(totals) {
        if key.starts_with("python") && python.is_none() {
            continue;
        }
        println!("{label}: {} ({shape})", rate(n, seconds));
        println!("BQ-FIGURE sqs rate {key} {:.1}", n as f64 / seconds);
    }
    for (what, count) in ["publish_batch", "consume_c10"].iter().zip(requests) {
        let per = count as f64 / n as f64;
        println!(
            "rust   {what}: {count} requests for {n} messages = {per:.3} requests per message"
        );
        println!("BQ-FIGURE sqs requests {what} {per:.4}");
    }
    for (who, spent) in ["rust-c1", "rust-c8", "rust-c10", "python"].iter().zip(cpu) {
        if *who == "python" && (python.is_none() || !python_cpu) {
            continue;
        }
        println!(
            "{who:<6} consume: {:.1} µs CPU per message (this process, getrusage)",
            spent.as_secs_f64() * 1e6 / n as f64
        );
        println!("{}", cpu_figure("sqs", who, spent, n));
    }
    latency(&bench, &runtime);
}

/// The loads the SQS benchmark offers, messages/s and for how long: 10 for 10 s (a load moto
/// lets both SDKs sustain, so the two are compared; a hundred messages, so the p99 is not just
/// the slowest of thirty) and 100, the lowest of [`OPEN_LOOP_LOADS`]. moto,
/// not either SDK, bounds the rest: on 2026-12-05 it handled about 25 messages/s at 100 msg/s
/// offered (both SDKs alike), and at 1 000 msg/s this SDK's 256 publishes in flight made its
/// `SendMessage` answers take over 10 s (the client's timeout), on a server other tests share;
/// 1 000 and 10 000 msg/s are therefore not offered (and printed as such).
const SQS_LOADS: [(u64, Duration); 2] =
    [(10, Duration::from_secs(10)), (100, Duration::from_secs(3))];

/// The open-loop latency rows (this SDK with its defaults, then the Python SDK), each pass on
/// a queue of its own.
fn latency(bench: &Bench, runtime: &tokio::runtime::Runtime) {
    let python = python();
    for (rate, duration) in SQS_LOADS {
        let (mut rust, mut py) = (None::<OpenLoopRun>, None::<OpenLoopRun>);
        for _ in 0..OPEN_LOOP_PASSES {
            let run = runtime.block_on(async {
                let queue = bench.queue("open").await;
                // The app's defaults: the URL's options only (one message per receive).
                let options = SqsOptions::from_url(&bench.url).expect("a valid URL");
                let transport =
                    SqsTransport::new(AwsSqs::new(sdk(&bench.region, &bench.endpoint)), options);
                let run = open_loop(
                    App::builder(transport).queue(queue.clone()),
                    URN,
                    rate,
                    duration,
                )
                .await;
                bench.delete_queue(&queue).await;
                run
            });
            OpenLoopRun::keep_better(&mut rust, run);
            let Some(python) = &python else { continue };
            let queue = runtime.block_on(bench.queue("open-py"));
            match python_open_loop(python, &bench.url, &queue, rate, duration) {
                Some(run) => OpenLoopRun::keep_better(&mut py, run),
                None => println!("sqs: the Python SDK's open loop could not run (see above)"),
            }
            runtime.block_on(bench.delete_queue(&queue));
        }
        for (who, run) in [("rust", rust), ("python", py)] {
            if let Some(run) = run {
                run.print("sqs", who);
            }
        }
    }
    for (rate, _) in OPEN_LOOP_LOADS {
        if SQS_LOADS.iter().all(|(offered, _)| *offered != rate) {
            println!(
                "sqs: {rate} msg/s not offered: not sustained on moto, whose rates bound both SDKs' here (see SQS_LOADS in the benchmark)"
            );
        }
    }
}
