//! Publish + consume + ack messages/s on the same local Redis: the Rust worker (both layouts)
//! against the Python reference SDK 1.24.0, and their ratio.
//!
//! `cargo bench -p babelqueue-transport-redis --bench redis` (Redis from `scripts/brokers.sh up
//! redis`, the Python SDK from `scripts/brokers.sh up python`; `BQ_REDIS_URL`, `BQ_PYTHON`).
//! Each side publishes N messages one by one, then consumes them with a no-op handler; the
//! figure is N / (publish time + consume time).

#![allow(missing_docs, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError};
use babelqueue_transport_redis::RedisTransport;
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

async fn rust_round(laravel: bool, n: u64, concurrency: usize) -> (Duration, Duration) {
    let queue = format!("bq-bench-{:08x}", fastrand::u32(..));
    let transport = RedisTransport::connect(&url(laravel))
        .await
        .expect("Redis is reachable");
    let app = App::builder(transport)
        .queue(queue.clone())
        .concurrency(concurrency)
        .poll_timeout(Duration::from_millis(200))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let data = serde_json::json!({"order_id": 1042, "total": 99.9});
    let started = Instant::now();
    for _ in 0..n {
        app.publish(URN, &data).await.unwrap();
    }
    let published = started.elapsed();
    let started = Instant::now();
    let summary = app
        .consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, n);
    (published, started.elapsed())
}

fn python_round(laravel: bool, n: u64) -> Option<(Duration, Duration)> {
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
    ))
}

fn rate(n: u64, (p, c): (Duration, Duration)) -> f64 {
    n as f64 / (p + c).as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
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
                    let (p, c) = rust_round(laravel, BATCH, 1).await;
                    total += p + c;
                }
                total
            });
        });
    }
    group.finish();
    criterion.final_summary();

    if std::env::args().any(|a| a == "--bench") {
        const N: u64 = 3_000;
        for laravel in [false, true] {
            let layout = if laravel {
                "laravel layout"
            } else {
                "reliable layout"
            };
            let rust1 = runtime.block_on(rust_round(laravel, N, 1));
            let rust8 = runtime.block_on(rust_round(laravel, N, 8));
            let python = python_round(laravel, N);
            println!(
                "redis {layout}, {N} messages: rust {:.0} msg/s (publish {:?}, consume+ack {:?}), rust concurrency 8 {:.0} msg/s",
                rate(N, rust1),
                rust1.0,
                rust1.1,
                rate(N, rust8)
            );
            match python {
                Some(py) => println!(
                    "redis {layout}, {N} messages: python {:.0} msg/s (publish {:?}, consume+ack {:?}); rust/python = {:.2}x",
                    rate(N, py),
                    py.0,
                    py.1,
                    rate(N, rust1) / rate(N, py)
                ),
                None => println!("redis {layout}: the Python SDK could not run (see above)"),
            }
        }
    }
}
