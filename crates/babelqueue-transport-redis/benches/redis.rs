//! Publish and consume+ack messages/s on the same local Redis, both layouts, side by side: this
//! SDK (concurrency 1 and 8), the Python reference SDK 1.24.0, and a raw client loop with the
//! same durability (the same reserve and settle scripts, one message per round trip, no
//! runtime), then the ratios.
//!
//! `cargo bench -p babelqueue-transport-redis --bench redis` (Redis from `scripts/brokers.sh up
//! redis`, the Python SDK from `scripts/brokers.sh up python`; `BQ_REDIS_URL`, `BQ_PYTHON`,
//! `BQ_BENCH_MESSAGES` (3 000 by default)). With `BQ_BENCH_FIGURES_ONLY=1` criterion is
//! skipped; every figure is also a `BQ-FIGURE broker <name> <publish|consume> <who> <msg/s>`
//! line, which `cargo xtask bench brokers` reads.
//!
//! Publishing: this SDK publishes `App::publish_batch` in batches of 100 (`rust-c8` rows) and
//! `App::publish` one by one (`rust-c1` row); Python and the raw loop publish one by one
//! (`RPUSH`, or the Laravel push script). Consuming: a no-op handler, every message acknowledged;
//! `rust-c8` with the default prefetch (the transport's 4 per handler slot: 32),
//! `rust-c8-prefetch8` with `.prefetch(8)` (only what runs), `rust-c8-prefetch64` with
//! `.prefetch(64)`. Then the
//! idle-to-handled latency: the median time from publishing into an empty queue to the waiting
//! worker's handler starting. Beside each consume rate, the consuming side's CPU-seconds per
//! 1 000 messages (`BQ-FIGURE broker <name> cpu <who> <s>`: getrusage of this process around the
//! consume phase; the Python SDK's own process's). Last, the open-loop publish-to-handled
//! latency at each load of `babelqueue_testkit::OPEN_LOOP_LOADS`, this SDK with its defaults and
//! the Python SDK (`xtask/bench/python_latency.py`), as `BQ-FIGURE latency` lines, with the same
//! schedule on memory:// first (the `memory` row: the runtime and the machine alone); each load
//! twice, the three sides' passes in turn, each side's better pass kept.
//! `BQ_BENCH_ONLY=latency` runs only the open-loop rows.

#![allow(missing_docs, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport};
use babelqueue_envelope::Envelope;
use babelqueue_testkit::{
    OPEN_LOOP_LOADS, OPEN_LOOP_PASSES, OpenLoopRun, PythonPeer, cpu_figure, cpu_time, open_loop,
    python_open_loop,
};
use babelqueue_transport_redis::client::Reply;
use babelqueue_transport_redis::{
    FredClient, Layout, RedisClient, RedisOptions, RedisTransport, layout, scripts,
};
use criterion::{Criterion, Throughput};

const URN: &str = "urn:babel:bench:noop";

fn base_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn url(laravel: bool) -> String {
    if laravel {
        format!("{}?laravel=1", base_url())
    } else {
        base_url()
    }
}

fn data() -> serde_json::Value {
    serde_json::json!({"order_id": 1042, "total": 99.9})
}

/// This SDK: publish `n` (one by one, or in batches of 100), then consume them all.
async fn rust_round(
    laravel: bool,
    n: u64,
    concurrency: usize,
    prefetch: Option<usize>,
    batched: bool,
) -> Round {
    let queue = format!("bq-bench-{:08x}", fastrand::u32(..));
    let transport = RedisTransport::connect(&url(laravel))
        .await
        .expect("Redis is reachable");
    let builder = App::builder(transport)
        .queue(queue.clone())
        .concurrency(concurrency)
        .poll_timeout(Duration::from_millis(200))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) });
    let app = match prefetch {
        Some(n) => builder.prefetch(n),
        None => builder,
    }
    .build()
    .expect("an app");
    let data = data();
    let started = Instant::now();
    if batched {
        let mut left = n;
        while left > 0 {
            let take = left.min(100);
            let batch: Vec<Envelope> = (0..take)
                .map(|_| app.envelope(URN).data(&data).build().expect("an envelope"))
                .collect();
            app.publish_batch(&queue, &batch).await.expect("published");
            left -= take;
        }
    } else {
        for _ in 0..n {
            app.publish(URN, &data).await.expect("published");
        }
    }
    let published = started.elapsed();
    let (started, cpu) = (Instant::now(), cpu_time());
    let summary = app
        .consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .expect("consumed");
    assert_eq!(summary.processed, n);
    (published, started.elapsed(), Some(cpu_time() - cpu))
}

/// The raw loop: the same scripts the transport runs, one message per round trip, no runtime
/// (publish: RPUSH or the push script; consume: reserve, then settle, per message).
async fn raw_round(laravel: bool, n: u64) -> Round {
    let queue = format!("bq-bench-raw-{:08x}", fastrand::u32(..));
    let client: Arc<dyn RedisClient> =
        Arc::new(FredClient::connect(&base_url()).await.expect("connect"));
    let options = RedisOptions {
        layout: if laravel {
            Layout::Laravel
        } else {
            Layout::Reliable
        },
        ..RedisOptions::default()
    };
    let body = Envelope::builder(URN)
        .queue(queue.clone())
        .data(&data())
        .build()
        .expect("an envelope")
        .encode()
        .expect("encodes")
        .into_bytes();
    let (ready, notify) = (options.ready(&queue), options.notify(&queue));
    let started = Instant::now();
    for _ in 0..n {
        if laravel {
            client
                .eval(
                    &scripts::PUSH,
                    vec![ready.clone().into(), notify.clone().into()],
                    vec![body.clone()],
                )
                .await
                .expect("pushed");
        } else {
            client.rpush(ready.as_bytes(), &body).await.expect("pushed");
        }
    }
    let published = started.elapsed();
    let (started, cpu) = (Instant::now(), cpu_time());
    let mut consumed = 0;
    while consumed < n {
        let deadline = layout::deadline_score(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            options.retry_after,
        )
        .into_bytes();
        if laravel {
            let reply = client
                .eval(
                    &scripts::RESERVE_ZSET,
                    vec![
                        ready.clone().into(),
                        options.reserved(&queue).into(),
                        notify.clone().into(),
                    ],
                    vec![deadline, b"1".to_vec()],
                )
                .await
                .expect("reserved");
            let Reply::Array(pair) = reply else { break };
            let Some(Reply::Bytes(member)) = pair.into_iter().nth(1) else {
                break;
            };
            client
                .zrem(options.reserved(&queue).as_bytes(), &member)
                .await
                .expect("acknowledged");
        } else {
            let token = layout::new_token();
            let reply = client
                .eval(
                    &scripts::RESERVE_LEGACY,
                    vec![
                        ready.clone().into(),
                        options.processing(&queue).into(),
                        options.deadlines(&queue).into(),
                    ],
                    vec![deadline, token.clone().into_bytes()],
                )
                .await
                .expect("reserved");
            let Reply::Array(raws) = reply else { break };
            let Some(Reply::Bytes(raw)) = raws.into_iter().next() else {
                break;
            };
            client
                .eval(
                    &scripts::SETTLE_LEGACY,
                    vec![
                        options.processing(&queue).into(),
                        options.deadlines(&queue).into(),
                    ],
                    vec![token.into_bytes(), raw],
                )
                .await
                .expect("acknowledged");
        }
        consumed += 1;
    }
    assert_eq!(consumed, n);
    (published, started.elapsed(), Some(cpu_time() - cpu))
}

/// Idle-to-handled latency (the testkit's helper): the median over 31 messages.
async fn idle_latency(laravel: bool) -> Duration {
    let queue = format!("bq-bench-idle-{:08x}", fastrand::u32(..));
    let transport = RedisTransport::connect(&url(laravel))
        .await
        .expect("Redis is reachable");
    let builder = App::builder(transport)
        .queue(queue)
        .poll_timeout(Duration::from_secs(1));
    babelqueue_testkit::idle_to_handled(builder, URN, 31).await
}

fn python_round(laravel: bool, n: u64) -> Option<Round> {
    let python = std::env::var_os("BQ_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../cache/venv/bin/python")
        });
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/peer.py");
    let queue = format!("bq-bench-py-{:08x}", fastrand::u32(..));
    let out = Command::new(python)
        .arg(script)
        .args(["bench", &url(laravel), &queue, &n.to_string()])
        .output()
        .ok()?;
    if !out.status.success() {
        println!(
            "python bench failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some((
        Duration::from_secs_f64(line["publish_s"].as_f64()?),
        Duration::from_secs_f64(line["consume_s"].as_f64()?),
        line["consume_cpu_s"].as_f64().map(Duration::from_secs_f64),
    ))
}

/// Publish time, consume time, and the consuming side's CPU time when measured.
type Round = (Duration, Duration, Option<Duration>);

fn print(broker: &str, who: &str, n: u64, (publish, consume, cpu): Round) {
    let (p, c) = (
        n as f64 / publish.as_secs_f64(),
        n as f64 / consume.as_secs_f64(),
    );
    println!("{broker}, {who}: publish {p:.0} msg/s, consume+ack {c:.0} msg/s ({n} messages)");
    println!("BQ-FIGURE broker {broker} publish {who} {p:.0}");
    println!("BQ-FIGURE broker {broker} consume {who} {c:.0}");
    if let Some(cpu) = cpu {
        println!("{}", cpu_figure(broker, who, cpu, n));
    }
}

/// The open-loop latency rows (this SDK with its defaults, then the Python SDK) at each load
/// of [`OPEN_LOOP_LOADS`], on the reliable layout.
fn latency(runtime: &tokio::runtime::Runtime) {
    let python = PythonPeer::interpreter();
    for (rate, duration) in OPEN_LOOP_LOADS {
        let (mut memory, mut rust, mut py) = (None::<OpenLoopRun>, None::<OpenLoopRun>, None);
        for _ in 0..OPEN_LOOP_PASSES {
            // The runtime alone (memory://, the same process and schedule): what the machine
            // and the runtime add before any broker does.
            let run = runtime.block_on(open_loop(
                App::builder(MemoryTransport::new()).queue("open"),
                URN,
                rate,
                duration,
            ));
            OpenLoopRun::keep_better(&mut memory, run);
            let run = runtime.block_on(async {
                let queue = format!("bq-bench-open-{:08x}", fastrand::u32(..));
                let transport = RedisTransport::connect(&base_url())
                    .await
                    .expect("Redis is reachable");
                open_loop(App::builder(transport).queue(queue), URN, rate, duration).await
            });
            OpenLoopRun::keep_better(&mut rust, run);
            let queue = format!("bq-bench-open-py-{:08x}", fastrand::u32(..));
            match python_open_loop(&python, &base_url(), &queue, rate, duration) {
                Some(run) => OpenLoopRun::keep_better(&mut py, run),
                None => println!("redis: the Python SDK's open loop could not run (see above)"),
            }
        }
        for (row, who, run) in [
            ("memory", "rust", memory),
            ("redis", "rust", rust),
            ("redis", "python", py),
        ] {
            if let Some(run) = run {
                run.print(row, who);
            }
        }
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let reachable = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(3), RedisTransport::connect(&base_url()))
            .await
            .is_ok_and(|r| r.is_ok())
    });
    if !reachable {
        assert!(
            std::env::var_os("BQ_REQUIRE_BROKERS").is_none(),
            "Redis is required at {}",
            base_url()
        );
        println!("SKIPPED: Redis not reachable at {}", base_url());
        return;
    }
    let figures_only = std::env::var_os("BQ_BENCH_FIGURES_ONLY").is_some();
    if !figures_only {
        let mut criterion = Criterion::default().configure_from_args();
        let mut group = criterion.benchmark_group("redis_round_trip");
        const BATCH: u64 = 200;
        group.throughput(Throughput::Elements(BATCH));
        group.sample_size(10);
        for laravel in [false, true] {
            let name = if laravel { "laravel" } else { "reliable" };
            group.bench_function(format!("publish_consume_ack_{name}"), |b| {
                b.to_async(&runtime).iter_custom(|iters| async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (p, c, _) = rust_round(laravel, BATCH, 1, None, false).await;
                        total += p + c;
                    }
                    total
                });
            });
        }
        group.finish();
        criterion.final_summary();
    }

    if std::env::var("BQ_BENCH_ONLY").as_deref() == Ok("latency") {
        // Only the open-loop rows, for tuning and `perf record`.
        latency(&runtime);
        return;
    }
    if figures_only || std::env::args().any(|a| a == "--bench") {
        let n: u64 = std::env::var("BQ_BENCH_MESSAGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3_000);
        for laravel in [false, true] {
            let broker = if laravel { "redis-laravel" } else { "redis" };
            print(
                broker,
                "rust-c1",
                n,
                runtime.block_on(rust_round(laravel, n, 1, None, false)),
            );
            print(
                broker,
                "rust-c8",
                n,
                runtime.block_on(rust_round(laravel, n, 8, None, true)),
            );
            print(
                broker,
                "rust-c8-prefetch8",
                n,
                runtime.block_on(rust_round(laravel, n, 8, Some(8), true)),
            );
            print(
                broker,
                "rust-c8-prefetch64",
                n,
                runtime.block_on(rust_round(laravel, n, 8, Some(64), true)),
            );
            print(broker, "raw", n, runtime.block_on(raw_round(laravel, n)));
            let p50 = runtime.block_on(idle_latency(laravel));
            println!("{broker}, rust-c1: idle-to-handled latency {p50:.2?} at the median");
            println!(
                "BQ-FIGURE broker {broker} latency rust-c1 {}",
                p50.as_micros()
            );
            match python_round(laravel, n) {
                Some(py) => print(broker, "python", n, py),
                None => println!("{broker}: the Python SDK could not run (see above)"),
            }
        }
        latency(&runtime);
    }
}
