//! Messages per second of the runtime on `memory://`: one worker, a no-op handler, every message
//! classified, decoded, routed, handled and acknowledged.
//!
//! `cargo bench -p babelqueue-core --bench runtime` prints criterion's figures, then a
//! messages/s line for concurrency 1 and 8.

#![allow(missing_docs, clippy::print_stdout)]

use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport, Transport};
use criterion::{Criterion, Throughput};

const URN: &str = "urn:babel:orders:created";
const BATCH: u64 = 2_000;

fn app(memory: &MemoryTransport, concurrency: usize) -> App {
    App::builder(memory.clone())
        .queue("orders")
        .concurrency(concurrency)
        .poll_timeout(Duration::from_millis(1))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .expect("valid configuration")
}

/// Publishes `n` messages, then times consuming them all.
async fn consume(app: &App, memory: &MemoryTransport, n: u64) -> Duration {
    let body = app
        .envelope(URN)
        .data(&serde_json::json!({"order_id": 1042, "total": 99.9}))
        .build()
        .unwrap();
    let body = body.encode().unwrap();
    for _ in 0..n {
        memory.publish("orders", body.as_bytes()).await.unwrap();
    }
    let started = Instant::now();
    let summary = app
        .consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(summary.processed, n);
    started.elapsed()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("runtime_memory");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(20);
    for concurrency in [1, 8] {
        let memory = MemoryTransport::new();
        let app = app(&memory, concurrency);
        group.bench_function(format!("consume_noop_concurrency_{concurrency}"), |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                let (app, memory) = (app.clone(), memory.clone());
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += consume(&app, &memory, BATCH).await;
                    }
                    total
                }
            });
        });
    }
    group.finish();
    criterion.final_summary();

    if std::env::args().any(|a| a == "--bench") {
        for concurrency in [1, 8] {
            let memory = MemoryTransport::new();
            let app = app(&memory, concurrency);
            let n = 50_000;
            let took = runtime.block_on(consume(&app, &memory, n));
            println!(
                "runtime on memory://, no-op handler, concurrency {concurrency}: {n} messages in {took:?} = {:.0} messages/s",
                n as f64 / took.as_secs_f64()
            );
        }
    }
}
