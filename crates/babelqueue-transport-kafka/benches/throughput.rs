//! Kafka consume throughput: the Rust worker (`App` + `KafkaTransport`, no-op handler), the
//! reference Python SDK 1.24.0 (`babelqueue[kafka]`, no-op handler) and a bare rdkafka
//! consumer with the same commit discipline as the worker's batches (poll one record, read it,
//! commit `offset + 1` in the background at most every 200 ms, the last one synchronously), all
//! reading the same records from the same local broker. Then publishing, two rounds in turn:
//! a bare rdkafka producer, `App::publish_batch` and the Python SDK each write the same count
//! of envelopes, each built from its data in the timed part, and wait until the broker
//! confirmed every one (the bare producer and the transport with the same window of delivery
//! reports outstanding, the Python SDK by flushing at the end); `publish_batch` by 1 024 a
//! call is printed beside, for the cost of waiting out each call's reports.
//!
//! `cargo bench -p babelqueue-transport-kafka --bench throughput` prints criterion's figures
//! for the per-record classification (gate, poison verdict, reconciliation) and header
//! projection, then one messages/s line per consumer and the ratios. `BQ_BENCH_MESSAGES`
//! (default 10000) sets the record count, `BQ_KAFKA_URL` the broker, `BQ_PYTHON` the
//! interpreter with the reference SDK. Each rate is measured from the first record handled to
//! the last, so joining the group is not counted.
//!
//! Beside each consume rate, the consuming side's CPU-seconds per 1 000 records (getrusage of
//! this process around the consume phase, the least of the rounds; the Python SDK's own
//! process's), as `BQ-FIGURE broker kafka cpu <who> <s>`; last, the open-loop
//! publish-to-handled latency at each load of `babelqueue_testkit::OPEN_LOOP_LOADS`, this SDK
//! with its defaults, again with `linger.ms=0` (`rust-linger0`), and the Python SDK
//! (`xtask/bench/python_latency.py`), as `BQ-FIGURE latency kafka` lines (each load twice, the
//! sides' passes in turn, each side's better pass kept).
//!
//! Without `--bench` (`cargo test --all-targets`) it runs the criterion functions once and a
//! 200-record smoke run of the two Rust consumers. With `BQ_BENCH_FIGURES_ONLY=1` (as
//! `cargo xtask bench brokers --broker kafka` runs it) it skips criterion and also prints
//! `BQ-FIGURE broker kafka consume|publish <who> <msg/s>` lines. For profiling, `BQ_BENCH_ONLY=rust-c8`
//! (or `rust-c1`) fills the topic and then runs only that worker, `BQ_BENCH_ROUNDS` times (2);
//! `BQ_BENCH_ONLY=publish` runs only this SDK's `publish_batch` (all in one call), as often;
//! `BQ_BENCH_ONLY=latency` only the open-loop rows.

#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::collections::VecDeque;
use std::hint::black_box;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, Transport as _};
use babelqueue_envelope::Envelope;
use babelqueue_testkit::{
    OPEN_LOOP_LOADS, OPEN_LOOP_PASSES, OpenLoopRun, cpu_figure, cpu_time, open_loop,
    python_open_loop, thread_cpu_time,
};
use babelqueue_transport_kafka::projection::{self, project};
use babelqueue_transport_kafka::{
    KafkaOptions, KafkaTransport, PRODUCE_WINDOW, RdKafkaClient, Record, TimestampType,
};
use criterion::{Criterion, Throughput};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

const URN: &str = "urn:babel:orders:created";

fn url() -> String {
    std::env::var("BQ_KAFKA_URL").unwrap_or_else(|_| "kafka://127.0.0.1:9092".to_owned())
}

fn brokers() -> String {
    KafkaOptions::from_url(&url())
        .expect("a valid BQ_KAFKA_URL")
        .brokers
}

fn reachable() -> bool {
    brokers().split(',').any(|b| {
        b.to_socket_addrs()
            .ok()
            .into_iter()
            .flatten()
            .any(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok())
    })
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("bq-bench-{prefix}-{}-{nanos}", std::process::id())
}

fn body(n: u64) -> Vec<u8> {
    Envelope::builder(URN)
        .queue("orders")
        .data(&serde_json::json!({"order_id": n, "total": 99.9, "currency": "EUR"}))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

/// Writes `n` envelopes with their `bq-*` headers, as a BabelQueue producer would, with a bare
/// rdkafka producer (librdkafka's defaults, `acks=all` among them, as the transport's), each
/// body built and projected in the timed loop, and up to [`PRODUCE_WINDOW`] delivery reports
/// outstanding (when the window is full the oldest report is awaited first, as the
/// transport's `send_many` does); returns messages/s until the last report came.
async fn fill(topic: &str, n: u64) -> f64 {
    let config = KafkaOptions::from_url(&url()).unwrap();
    RdKafkaClient::new(config)
        .create_topics(&[topic], 1)
        .await
        .expect("the bench topic");
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .unwrap();
    let started = Instant::now();
    let mut pending: VecDeque<rdkafka::producer::DeliveryFuture> =
        VecDeque::with_capacity(PRODUCE_WINDOW);
    for i in 0..n {
        let value = body(i);
        let mut headers = OwnedHeaders::new();
        for h in project(&value) {
            headers = headers.insert(Header {
                key: &h.key,
                value: h.value.as_deref(),
            });
        }
        let record = FutureRecord::<[u8], [u8]>::to(topic)
            .payload(&value)
            .headers(headers);
        if pending.len() >= PRODUCE_WINDOW
            && let Some(oldest) = pending.pop_front()
        {
            oldest.await.unwrap().unwrap();
        }
        match producer.send_result(record) {
            Ok(delivery) => pending.push_back(delivery),
            Err((e, _)) => panic!("enqueueing the bench records failed: {e}"),
        }
    }
    for d in pending {
        d.await.unwrap().unwrap();
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// This SDK publishing `n` envelopes as an application does: each one built from its data
/// (in the timed part, as the Python SDK's `publish` and the raw loop build theirs), then
/// handed to `App::publish_batch` by `chunk` (every delivery report awaited, up to
/// [`PRODUCE_WINDOW`] outstanding; a call returns once all of its records are confirmed);
/// messages/s until the last report came.
async fn rust_publish(topic: &str, n: u64, chunk: usize) -> f64 {
    RdKafkaClient::new(KafkaOptions::from_url(&url()).unwrap())
        .create_topics(&[topic], 1)
        .await
        .expect("the bench topic");
    let transport = KafkaTransport::connect(&url()).await.unwrap();
    let app = App::builder(transport.clone())
        .queue(topic)
        .build()
        .unwrap();
    let started = Instant::now();
    let envelopes: Vec<Envelope> = (0..n)
        .map(|i| {
            app.envelope(URN)
                .data(&serde_json::json!({"order_id": i, "total": 99.9, "currency": "EUR"}))
                .build()
                .unwrap()
        })
        .collect();
    for chunk in envelopes.chunks(chunk) {
        app.publish_batch(topic, chunk).await.unwrap();
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    transport.close().await.unwrap();
    rate
}

/// The reference Python SDK publishing `n` envelopes one by one, then flushing
/// (`tests/python/driver.py bench-publish`).
fn python_publish_rate(topic: &str, n: u64) -> Option<f64> {
    let python = python_path()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/driver.py");
    let output = std::process::Command::new(python)
        .arg(script)
        .args(["bench-publish", &brokers(), topic, &n.to_string()])
        .output()
        .expect("the Python driver runs");
    assert!(
        output.status.success(),
        "the Python publish bench failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = String::from_utf8_lossy(&output.stdout);
    let doc: serde_json::Value = serde_json::from_str(line.trim()).expect("a JSON line");
    Some(doc["messages"].as_f64().unwrap() / doc["seconds"].as_f64().unwrap().max(1e-9))
}

/// Messages per second between the first and the last of `n` handled records.
fn rate(n: u64, first: Instant, last: Instant) -> f64 {
    (n.saturating_sub(1)) as f64 / (last - first).as_secs_f64().max(1e-9)
}

/// The Rust worker: `App` + `KafkaTransport`, a no-op handler.
async fn rust_worker(topic: &str, n: u64, concurrency: usize) -> (f64, Duration) {
    let url = format!("{}?group_id={}", url(), unique("rust"));
    let stamps: Arc<Mutex<(Option<Instant>, Option<Instant>)>> = Arc::default();
    let count = Arc::new(AtomicU64::new(0));
    let (s, c) = (stamps.clone(), count.clone());
    let app = App::builder(KafkaTransport::connect(&url).await.unwrap())
        .queue(topic)
        .max_attempts(1)
        .concurrency(concurrency)
        .handle(URN, move |_ctx: Context| {
            let now = Instant::now();
            let mut stamps = s.lock().unwrap();
            stamps.0.get_or_insert(now);
            stamps.1 = Some(now);
            c.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    let mut settled = 0;
    let deadline = Instant::now() + Duration::from_secs(900);
    let cpu = cpu_time();
    while settled < n && Instant::now() < deadline {
        settled += app
            .consume(
                Consume::new()
                    .max_messages(n - settled)
                    .handle_signals(false),
            )
            .await
            .unwrap()
            .processed;
    }
    app.transport().close().await.unwrap();
    let cpu = cpu_time() - cpu;
    assert_eq!(count.load(Ordering::SeqCst), n, "every record handled once");
    let (first, last) = *stamps.lock().unwrap();
    (rate(n, first.unwrap(), last.unwrap()), cpu)
}

/// A bare rdkafka consumer with the worker's commit discipline: poll one record, read it, and
/// commit `offset + 1` asynchronously once 200 ms passed since the last commit (the transport's
/// default commit interval); the last position synchronously.
fn bare(topic: &str, n: u64) -> (f64, Duration) {
    let cpu = cpu_time();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("group.id", unique("bare"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut handled = 0;
    let mut bytes = 0;
    let (mut first, mut last) = (None, Instant::now());
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut committed_at = Instant::now() - Duration::from_secs(1);
    let mut position = TopicPartitionList::new();
    while handled < n && Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_secs(1)) else {
            continue;
        };
        let message = message.expect("a record");
        bytes += black_box(message.payload().map_or(0, <[u8]>::len));
        position = TopicPartitionList::new();
        position
            .add_partition_offset(
                message.topic(),
                message.partition(),
                Offset::Offset(message.offset() + 1),
            )
            .unwrap();
        if committed_at.elapsed() >= Duration::from_millis(200) {
            consumer.commit(&position, CommitMode::Async).unwrap();
            committed_at = Instant::now();
        }
        handled += 1;
        last = Instant::now();
        first.get_or_insert(last);
    }
    assert_eq!(handled, n, "every record read once ({bytes} bytes)");
    consumer.commit(&position, CommitMode::Sync).unwrap();
    drop(consumer);
    (rate(n, first.unwrap(), last), cpu_time() - cpu)
}

/// The reference Python SDK (`tests/python/driver.py bench`).
/// The reference SDK's interpreter, `None` (after a SKIPPED line) when it is missing.
fn python_path() -> Option<PathBuf> {
    let python = std::env::var_os("BQ_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python")
        });
    if !python.exists() {
        eprintln!(
            "SKIPPED: the Python SDK comparison (no interpreter at {})",
            python.display()
        );
        return None;
    }
    Some(python)
}

fn python(topic: &str, n: u64) -> Option<(f64, Option<Duration>)> {
    let python = python_path()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/driver.py");
    let output = std::process::Command::new(python)
        .arg(script)
        .args([
            "bench",
            &brokers(),
            topic,
            &n.to_string(),
            &unique("python"),
        ])
        .output()
        .expect("the Python driver runs");
    assert!(
        output.status.success(),
        "the Python bench failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = String::from_utf8_lossy(&output.stdout);
    let doc: serde_json::Value = serde_json::from_str(line.trim()).expect("a JSON line");
    let messages = doc["messages"].as_f64().unwrap();
    let seconds = doc["seconds"].as_f64().unwrap();
    let cpu = doc["cpu_s"].as_f64().map(Duration::from_secs_f64);
    Some(((messages - 1.0).max(0.0) / seconds.max(1e-9), cpu))
}

fn sample_record() -> Record {
    let value = body(1042);
    Record {
        topic: "orders".into(),
        partition: 0,
        offset: 7,
        key: Some(b"customer-0042".to_vec()),
        headers: project(&value),
        value: Some(value),
        timestamp: Some(1_749_132_727_000),
        timestamp_type: TimestampType::CreateTime,
    }
}

fn main() {
    let figures_only = std::env::var_os("BQ_BENCH_FIGURES_ONLY").is_some();
    if !figures_only {
        criterion_runs();
    }
    live(figures_only);
}

fn criterion_runs() {
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("kafka_record");
    group.throughput(Throughput::Elements(1));
    let record = sample_record();
    group.bench_function("facts_then_classify", |b| {
        b.iter(|| {
            let record = black_box(&record);
            let facts = projection::facts(record);
            let body = record.value.as_deref().unwrap_or_default();
            matches!(
                babelqueue_testkit::reading::classify(body, &facts, "orders"),
                babelqueue_testkit::reading::Class::Readable { .. }
            )
        });
    });
    let value = record.value.clone().unwrap();
    group.bench_function("project_headers", |b| {
        b.iter(|| project(black_box(&value)));
    });
    group.finish();
    criterion.final_summary();
}

/// The live consume rates; with `figures_only` (`cargo xtask bench brokers --broker kafka`)
/// the full run, with `BQ-FIGURE` lines.
fn live(figures_only: bool) {
    if !reachable() {
        println!(
            "SKIPPED: kafka not reachable at {} (scripts/brokers.sh up kafka); live throughput not measured",
            brokers()
        );
        return;
    }
    let full = figures_only || std::env::args().any(|a| a == "--bench");
    let n: u64 = if full {
        std::env::var("BQ_BENCH_MESSAGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000)
    } else {
        200
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if std::env::var("BQ_BENCH_ONLY").as_deref() == Ok("latency") {
        latency(&runtime);
        return;
    }
    if std::env::var("BQ_BENCH_ONLY").as_deref() == Ok("publish") {
        // Only this SDK's publishing, for `perf record`.
        let rounds: usize = std::env::var("BQ_BENCH_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2);
        for _ in 0..rounds {
            let chunk = usize::try_from(n).unwrap_or(usize::MAX).max(1);
            let rate = runtime.block_on(rust_publish(&unique("publish"), n, chunk));
            println!("  Rust App::publish_batch, all in one call: {rate:.0} messages/s");
        }
        return;
    }
    let topic = unique("topic");
    let raw_publish = runtime.block_on(fill(&topic, n));
    if let Some(concurrency) = std::env::var("BQ_BENCH_ONLY")
        .ok()
        .and_then(|only| only.strip_prefix("rust-c")?.parse::<usize>().ok())
    {
        // Only this worker, for `perf record`: after the fill, nothing else runs.
        let rounds: usize = std::env::var("BQ_BENCH_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2);
        println!("  bare rdkafka producer (the fill): {raw_publish:.0} messages/s");
        for _ in 0..rounds {
            let (rate, cpu) = runtime.block_on(rust_worker(&topic, n, concurrency));
            println!(
                "  Rust worker, concurrency {concurrency}: {rate:.0} messages/s, {:.1} µs CPU per record",
                cpu.as_secs_f64() * 1e6 / n as f64
            );
        }
        return;
    }
    // Publishing, two rounds in turn (the raw producer's first round is the fill above), the
    // better round of each counting: every side hands over all `n` records and waits until
    // the broker confirmed each one (the Python SDK flushes at the end).
    let (mut raw_publish, mut rust_publish_all, mut python_publish) = (raw_publish, 0.0f64, None);
    for round in 0..2 {
        if round > 0 {
            raw_publish = raw_publish.max(runtime.block_on(fill(&unique("raw-publish"), n)));
        }
        let chunk = usize::try_from(n).unwrap_or(usize::MAX).max(1);
        rust_publish_all =
            rust_publish_all.max(runtime.block_on(rust_publish(&unique("publish"), n, chunk)));
        if full && let Some(rate) = python_publish_rate(&unique("python-publish"), n) {
            python_publish = Some(python_publish.unwrap_or(0.0f64).max(rate));
        }
    }
    // For the record: the same by 1 024 a call, each call waiting for its own reports.
    let rust_publish_1024 = runtime.block_on(rust_publish(&unique("publish-1024"), n, 1024));
    // Two rounds in turn, each consumer in its own group over the same records; the better
    // round of each counts (the first reader of a fresh topic also warms the broker's cache).
    // Each side's CPU time is its best round's too (the least CPU of its rounds: other work on
    // the machine only ever adds to it).
    let (mut bare_best, mut rust1, mut rust8, mut python_best) = (0.0f64, 0.0f64, 0.0f64, None);
    let mut cpu: std::collections::BTreeMap<&str, Duration> = std::collections::BTreeMap::new();
    let mut least = |who: &'static str, spent: Duration| {
        let entry = cpu.entry(who).or_insert(spent);
        *entry = (*entry).min(spent);
    };
    for _ in 0..2 {
        let (rate, spent) = bare(&topic, n);
        bare_best = bare_best.max(rate);
        least("raw", spent);
        let (rate, spent) = runtime.block_on(rust_worker(&topic, n, 1));
        rust1 = rust1.max(rate);
        least("rust-c1", spent);
        let (rate, spent) = runtime.block_on(rust_worker(&topic, n, 8));
        rust8 = rust8.max(rate);
        least("rust-c8", spent);
        if full && let Some((rate, spent)) = python(&topic, n) {
            python_best = Some(python_best.unwrap_or(0.0f64).max(rate));
            if let Some(spent) = spent {
                least("python", spent);
            }
        }
    }
    let (bare, python) = (bare_best, python_best);
    println!(
        "kafka consume, {n} records on one partition, no-op handler, process-then-commit (best of 2 rounds):"
    );
    println!("  bare rdkafka consumer (poll, commit every 200 ms)  {bare:>9.0} messages/s");
    println!("  Rust worker (App + KafkaTransport), concurrency 1 {rust1:>9.0} messages/s");
    println!("  Rust worker (App + KafkaTransport), concurrency 8 {rust8:>9.0} messages/s");
    if let Some(python) = python {
        println!("  Python SDK 1.24.0 (babelqueue[kafka])             {python:>9.0} messages/s");
        println!(
            "  ratios: Rust c1 / Python = {:.2}x, Rust c8 / Python = {:.2}x",
            rust1 / python,
            rust8 / python
        );
    }
    println!(
        "  ratios: Rust c1 / bare = {:.2}, Rust c8 / bare = {:.2}",
        rust1 / bare,
        rust8 / bare
    );
    println!(
        "kafka publish, {n} records, each built from its data and confirmed (best of 2 rounds):"
    );
    println!(
        "  bare rdkafka producer ({PRODUCE_WINDOW} reports outstanding) {raw_publish:>9.0} messages/s"
    );
    println!("  Rust App::publish_batch, all in one call       {rust_publish_all:>9.0} messages/s");
    println!(
        "  Rust App::publish_batch by 1 024 (one round)   {rust_publish_1024:>9.0} messages/s"
    );
    if let Some(python) = python_publish {
        println!("  Python SDK 1.24.0, one by one, then flush      {python:>9.0} messages/s");
        println!(
            "  ratios: Rust / Python = {:.2}x, Rust / bare = {:.2}",
            rust_publish_all / python,
            rust_publish_all / raw_publish
        );
    }
    for (who, rate) in [
        ("rust-c8", Some(rust_publish_all)),
        ("raw", Some(raw_publish)),
        ("python", python_publish),
    ] {
        if let Some(rate) = rate {
            println!("BQ-FIGURE broker kafka publish {who} {rate:.0}");
        }
    }
    for (who, rate) in [
        ("rust-c1", Some(rust1)),
        ("rust-c8", Some(rust8)),
        ("raw", Some(bare)),
        ("python", python),
    ] {
        if let Some(rate) = rate {
            println!("BQ-FIGURE broker kafka consume {who} {rate:.0}");
        }
    }
    for (who, spent) in &cpu {
        println!(
            "  {who}: {:.1} µs CPU per record consumed",
            spent.as_secs_f64() * 1e6 / n as f64
        );
        println!("{}", cpu_figure("kafka", who, *spent, n));
    }
    // The envelope's decode alone: the part of a record's cost the raw loop, which reads no
    // envelope, does not have (the figure that bounds the CPU target).
    let decodes = 100_000;
    let decode = decode_cpu(decodes);
    println!(
        "  decode: {:.1} µs CPU per record (the envelope's one-pass decode alone, on one thread)",
        decode.as_secs_f64() * 1e6 / decodes as f64
    );
    println!("{}", cpu_figure("kafka", "decode", decode, decodes));
    if full {
        latency(&runtime);
    }
}

/// The CPU time of `n` one-pass decodes (`Envelope::decode_classified`, as the runtime
/// classifies a delivery) of the benchmark's body, on this thread.
fn decode_cpu(n: u64) -> Duration {
    let body = body(1);
    for _ in 0..1_000 {
        black_box(Envelope::decode_classified(black_box(&body)).is_ok());
    }
    let start = thread_cpu_time();
    for _ in 0..n {
        black_box(Envelope::decode_classified(black_box(&body)).is_ok());
    }
    thread_cpu_time().saturating_sub(start)
}

/// The open-loop latency rows (this SDK with its defaults, then the Python SDK) at each load
/// of [`OPEN_LOOP_LOADS`], each on a topic of its own.
fn latency(runtime: &tokio::runtime::Runtime) {
    // `rust-linger0`: the producer's batching linger (librdkafka's `linger.ms`, 5 ms by
    // default) is the default that trades latency for publishing throughput; the same run
    // without it.
    let sides: [(&str, &str); 2] = [("rust", ""), ("rust-linger0", "&linger.ms=0")];
    for (rate, duration) in OPEN_LOOP_LOADS {
        let mut best: Vec<Option<OpenLoopRun>> = vec![None; sides.len() + 1];
        for _ in 0..OPEN_LOOP_PASSES {
            for (at, (_, option)) in sides.iter().enumerate() {
                let (topic, group_url) = (
                    unique("open"),
                    format!("{}?group_id={}{option}", url(), unique("open")),
                );
                let run = runtime.block_on(async {
                    let transport = KafkaTransport::connect(&group_url)
                        .await
                        .expect("Kafka is reachable");
                    open_loop(App::builder(transport).queue(topic), URN, rate, duration).await
                });
                OpenLoopRun::keep_better(&mut best[at], run);
            }
            let Some(python) = python_path() else {
                continue;
            };
            let py_url = format!("kafka://{}", brokers());
            match python_open_loop(&python, &py_url, &unique("open-py"), rate, duration) {
                Some(run) => OpenLoopRun::keep_better(&mut best[sides.len()], run),
                None => println!("kafka: the Python SDK's open loop could not run (see above)"),
            }
        }
        let names = sides.iter().map(|(who, _)| *who).chain(["python"]);
        for (who, run) in names.zip(best) {
            if let Some(run) = run {
                run.print("kafka", who);
            }
        }
    }
}
