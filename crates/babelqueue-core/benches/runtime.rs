//! Messages per second of the runtime on `memory://`: one worker, a no-op handler, every message
//! classified, decoded, routed, handled and acknowledged; and the worker's resident memory over
//! one million messages.
//!
//! `cargo bench -p babelqueue-core --bench runtime` prints criterion's figures, then:
//!
//! * first, while the process is small, the resident memory of a worker after 100 000 and after
//!   1 000 000 messages, fed by a producer that keeps the queue about 20 000 deep;
//! * messages/s at concurrency 1 and 8, with the default prefetch (as many deliveries as
//!   handler slots) and with a prefetch of 64, the best and the median of several rounds taken
//!   in turn (a round of each configuration, then the next), with the process's resident
//!   memory before and after the rounds (the queue's bodies included: the process, not only
//!   the worker).
//!
//! With `BQ_BENCH_FIGURES_ONLY=1` it skips criterion; every figure is also printed as a
//! `BQ-FIGURE` line, which `cargo xtask bench runtime` reads. `BQ_BENCH_MESSAGES` sets the
//! messages per throughput round (200 000 by default), `BQ_BENCH_ROUNDS` the timed rounds of
//! each configuration (7 by default; the best and the median are printed: on a shared machine
//! other work only ever adds time, so the best round is the one it disturbed least);
//! `BQ_BENCH_ONLY=1:1` runs only that `concurrency:prefetch` configuration (for profiling).

#![allow(missing_docs, clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use babelqueue_core::{App, BatchPublisher, Consume, Context, HandlerError, MemoryTransport};
use babelqueue_envelope::Envelope;
use criterion::{Criterion, Throughput};

const URN: &str = "urn:babel:orders:created";
const BATCH: u64 = 2_000;

fn app(memory: &MemoryTransport, concurrency: usize, prefetch: Option<usize>) -> App {
    let builder = App::builder(memory.clone())
        .queue("orders")
        .concurrency(concurrency)
        .poll_timeout(Duration::from_millis(1))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) });
    match prefetch {
        Some(n) => builder.prefetch(n),
        None => builder,
    }
    .build()
    .expect("valid configuration")
}

fn envelopes(app: &App, n: u64) -> Vec<Envelope> {
    (0..n)
        .map(|i| {
            app.envelope(URN)
                .data(&serde_json::json!({"order_id": i, "total": 99.9, "currency": "EUR"}))
                .build()
                .expect("an envelope")
        })
        .collect()
}

/// `n` encoded envelopes (never all held decoded at once).
fn encoded(app: &App, n: u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            envelopes(app, 1)
                .pop()
                .expect("an envelope")
                .encode()
                .expect("encodes")
                .replace("\"order_id\":0", &format!("\"order_id\":{i}"))
                .into_bytes()
        })
        .collect()
}

/// Publishes `bodies`, then times consuming them all.
async fn consume(app: &App, memory: &MemoryTransport, bodies: &[Vec<u8>]) -> Duration {
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    memory
        .publish_batch("orders", &slices)
        .await
        .expect("published");
    let n = bodies.len() as u64;
    let started = Instant::now();
    let summary = app
        .consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .expect("consumed");
    assert_eq!(summary.processed, n);
    started.elapsed()
}

/// The resident set size of this process, in KiB (0 where /proc is missing).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One worker consumes `total` messages while a producer keeps the queue about 20 000 deep;
/// returns the RSS (KiB) after `early` and after `total` messages.
async fn flat_memory(early: u64, total: u64) -> (u64, u64) {
    let memory = MemoryTransport::new();
    let handled = Arc::new(AtomicU64::new(0));
    let rss_early = Arc::new(AtomicU64::new(0));
    let app = {
        let (handled, rss_early) = (handled.clone(), rss_early.clone());
        App::builder(memory.clone())
            .queue("orders")
            .poll_timeout(Duration::from_millis(1))
            .handle(URN, move |_ctx: Context| {
                let n = handled.fetch_add(1, Ordering::Relaxed) + 1;
                if n == early {
                    rss_early.store(rss_kib(), Ordering::Relaxed);
                }
                async { Ok::<(), HandlerError>(()) }
            })
            .build()
            .expect("valid configuration")
    };
    let producer = {
        let (app, memory) = (app.clone(), memory.clone());
        tokio::spawn(async move {
            let chunk = envelopes(&app, 1_000);
            let mut published = 0;
            while published < total {
                if memory.len("orders") < 20_000 {
                    app.publish_batch("orders", &chunk)
                        .await
                        .expect("published");
                    published += chunk.len() as u64;
                } else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        })
    };
    let summary = app
        .consume(
            Consume::new()
                .max_messages(total)
                .idle_timeout(Duration::from_secs(5))
                .handle_signals(false),
        )
        .await
        .expect("consumed");
    producer.await.expect("the producer");
    assert_eq!(summary.processed, total);
    (rss_early.load(Ordering::Relaxed), rss_kib())
}

/// Envelopes built, encoded and published per second: one `App::publish` each, then
/// `App::publish_batch` by 100.
async fn publishing(n: u64) {
    let memory = MemoryTransport::new();
    let app = app(&memory, 1, None);
    let data = serde_json::json!({"order_id": 1042, "total": 99.9, "currency": "EUR"});
    let started = Instant::now();
    for _ in 0..n {
        app.publish(URN, &data).await.expect("published");
    }
    let one = n as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    for _ in 0..n / 100 {
        let batch: Vec<Envelope> = (0..100)
            .map(|_| app.envelope(URN).data(&data).build().expect("an envelope"))
            .collect();
        app.publish_batch("orders", &batch)
            .await
            .expect("published");
    }
    let batched = (n / 100 * 100) as f64 / started.elapsed().as_secs_f64();
    println!(
        "publish on memory://: {one:.0} envelopes/s one by one, {batched:.0} envelopes/s in batches of 100"
    );
    println!("BQ-FIGURE publish {one:.0} {batched:.0}");
}

/// One configuration of the throughput rounds.
struct Run {
    concurrency: usize,
    prefetch: usize,
    memory: MemoryTransport,
    app: App,
    rates: Vec<f64>,
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let figures_only = std::env::var_os("BQ_BENCH_FIGURES_ONLY").is_some();
    if !figures_only {
        let mut criterion = Criterion::default().configure_from_args();
        let mut group = criterion.benchmark_group("runtime_memory");
        group.throughput(Throughput::Elements(BATCH));
        group.sample_size(20);
        for concurrency in [1, 8] {
            let memory = MemoryTransport::new();
            let app = app(&memory, concurrency, None);
            let batch = encoded(&app, BATCH);
            group.bench_function(format!("consume_noop_concurrency_{concurrency}"), |b| {
                b.to_async(&runtime).iter_custom(|iters| {
                    let (app, memory, batch) = (app.clone(), memory.clone(), batch.clone());
                    async move {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total += consume(&app, &memory, &batch).await;
                        }
                        total
                    }
                });
            });
        }
        group.finish();
        criterion.final_summary();
    }

    // `cargo test --benches` runs each benchmark once as a smoke test; skip the figures there.
    if !(figures_only || std::env::args().any(|a| a == "--bench")) {
        return;
    }
    // First, while the process is small: a worker's memory over a million messages.
    let only = std::env::var("BQ_BENCH_ONLY").ok();
    if only.is_none() {
        let (early, late) = runtime.block_on(flat_memory(100_000, 1_000_000));
        println!(
            "a worker's resident memory: {early} KiB after 100 000 messages, {late} KiB after 1 000 000 ({:+.1}%)",
            (late as f64 / early.max(1) as f64 - 1.0) * 100.0
        );
        println!("BQ-FIGURE rss 100000 {early} 1000000 {late}");
    }
    let n: u64 = std::env::var("BQ_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let rounds: usize = std::env::var("BQ_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(1);
    if only.is_none() {
        runtime.block_on(publishing(n.min(100_000)));
    }
    // Every configuration gets its app, its warm-up and its rounds, and the rounds are taken in
    // turn (a round of each, then the next round of each): a busy spell of the machine then
    // costs every configuration a round, rather than all the rounds of one.
    let mut runs: Vec<Run> = [(1, None), (1, Some(64)), (8, None), (8, Some(64))]
        .into_iter()
        .filter(|&(concurrency, prefetch)| {
            only.as_ref().is_none_or(|only| {
                *only == format!("{concurrency}:{}", prefetch.unwrap_or(concurrency))
            })
        })
        .map(|(concurrency, prefetch)| {
            let memory = MemoryTransport::new();
            let app = app(&memory, concurrency, prefetch);
            Run {
                concurrency,
                prefetch: prefetch.unwrap_or(concurrency),
                memory,
                app,
                rates: Vec::with_capacity(rounds),
            }
        })
        .collect();
    let Some(first) = runs.first() else {
        return;
    };
    let batch = encoded(&first.app, n);
    for run in &runs {
        // A warm-up run, so that the figures do not include first-touch allocations.
        runtime.block_on(consume(
            &run.app,
            &run.memory,
            &batch[..batch.len().min(10_000)],
        ));
    }
    let before = rss_kib();
    for _ in 0..rounds {
        for run in &mut runs {
            let took = runtime.block_on(consume(&run.app, &run.memory, &batch));
            run.rates.push(n as f64 / took.as_secs_f64());
        }
    }
    let after = rss_kib();
    for Run {
        concurrency,
        prefetch,
        mut rates,
        ..
    } in runs
    {
        rates.sort_by(f64::total_cmp);
        let (best, median) = (rates[rates.len() - 1], rates[rates.len() / 2]);
        let all: Vec<String> = rates.iter().rev().map(|r| format!("{r:.0}")).collect();
        println!(
            "runtime on memory://, no-op handler, concurrency {concurrency}, prefetch {prefetch}: {n} messages a round, best {best:.0} messages/s, median {median:.0} (rounds, fastest first: {}) (RSS {before} KiB before the rounds, {after} KiB after)",
            all.join(", ")
        );
        println!(
            "BQ-FIGURE runtime {concurrency} {prefetch} {best:.0} {median:.0} {before} {after}"
        );
    }
}
