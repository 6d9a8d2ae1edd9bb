//! Outbox throughput on a real PostgreSQL: rows/s written inside a transaction, and rows/s a
//! relay drains (claim, publish, settle) into a real Redis and into the in-memory transport (the
//! latter isolates the database's share).
//!
//! `cargo bench -p babelqueue-postgres --bench relay` (PostgreSQL and Redis from
//! `scripts/brokers.sh up postgres redis`; `BQ_POSTGRES_URL`, `BQ_REDIS_URL`). Each round writes
//! N rows in one transaction (untimed for the relay figures), then times `drain()`.

#![allow(missing_docs, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use babelqueue_core::{Envelope, MemoryTransport, Transport};
use babelqueue_outbox::OutboxRelay;
use babelqueue_postgres::tokio_postgres::Client;
use babelqueue_postgres::{PgOutbox, PgOutboxStore};
use babelqueue_transport_redis::fred::interfaces::KeysInterface;
use babelqueue_transport_redis::{FredClient, RedisTransport};
use criterion::{Criterion, Throughput};

fn pg_url() -> String {
    std::env::var("BQ_POSTGRES_URL").unwrap_or_else(|_| "postgres://bq:bq@127.0.0.1:5432/bq".into())
}

fn redis_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

const QUEUE: &str = "bq-bench-outbox";

struct Bench {
    table: String,
    outbox: PgOutbox,
    writer: tokio::sync::Mutex<Client>,
    redis: Option<(RedisTransport, FredClient)>,
}

impl Bench {
    fn envelope(n: usize) -> Envelope {
        Envelope::builder("urn:babel:orders:created")
            .queue(QUEUE)
            .data(&serde_json::json!({"order_id": n, "total": 99.9, "currency": "EUR"}))
            .build()
            .unwrap()
    }

    /// Writes `n` rows in one transaction; returns the time it took.
    async fn write(&self, n: usize) -> Duration {
        let envelopes: Vec<Envelope> = (0..n).map(Bench::envelope).collect();
        let mut client = self.writer.lock().await;
        let started = Instant::now();
        let tx = client.transaction().await.unwrap();
        for env in &envelopes {
            self.outbox.write(&tx, env).await.unwrap();
        }
        tx.commit().await.unwrap();
        started.elapsed()
    }

    async fn store(&self) -> PgOutboxStore {
        PgOutboxStore::connect(&pg_url())
            .await
            .unwrap()
            .with_table(&self.table)
            .unwrap()
    }

    /// Writes `n` rows, then times `relays` relays draining them concurrently into `transport`.
    async fn drain(
        &self,
        transport: Arc<dyn Transport>,
        n: usize,
        relays: usize,
        batch: usize,
    ) -> Duration {
        self.write(n).await;
        let mut built = Vec::new();
        for _ in 0..relays {
            built.push(
                OutboxRelay::builder_arc(transport.clone(), Arc::new(self.store().await))
                    .batch_size(batch)
                    .build()
                    .unwrap(),
            );
        }
        let started = Instant::now();
        let tasks: Vec<_> = built
            .into_iter()
            .map(|relay| tokio::spawn(async move { relay.drain().await.unwrap().published }))
            .collect();
        let mut published = 0;
        for task in tasks {
            published += task.await.unwrap();
        }
        let elapsed = started.elapsed();
        assert_eq!(published, n as u64);
        if let Some((_, raw)) = &self.redis {
            let _: i64 = raw.raw().del(QUEUE).await.unwrap_or(0);
        }
        elapsed
    }

    async fn cleanup(&self) {
        let client = self.writer.lock().await;
        let _ = client
            .batch_execute(&format!("DROP TABLE IF EXISTS \"{}\"", self.table))
            .await;
    }
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let required = std::env::var_os("BQ_REQUIRE_BROKERS").is_some();
    let Some(bench) = runtime.block_on(async {
        let client = match tokio::time::timeout(
            Duration::from_secs(5),
            babelqueue_postgres::connect(&pg_url()),
        )
        .await
        {
            Ok(Ok(client)) => client,
            other => {
                assert!(!required, "PostgreSQL is required at {}", pg_url());
                let why = match other {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".into(),
                };
                println!("SKIPPED: PostgreSQL not reachable at {} ({why})", pg_url());
                return None;
            }
        };
        let table = format!("bq_bench_outbox_{:08x}", fastrand::u32(..));
        let outbox = PgOutbox::with_table(&table).unwrap();
        outbox.migrate(&client).await.unwrap();
        let redis = match tokio::time::timeout(Duration::from_secs(3), async {
            let transport = RedisTransport::connect(&redis_url()).await?;
            let raw = FredClient::connect(&redis_url()).await?;
            Ok::<_, babelqueue_transport_redis::RedisError>((transport, raw))
        })
        .await
        {
            Ok(Ok(pair)) => Some(pair),
            _ => {
                assert!(!required, "Redis is required at {}", redis_url());
                println!(
                    "SKIPPED: the Redis figures (Redis not reachable at {})",
                    redis_url()
                );
                None
            }
        };
        Some(Bench {
            table,
            outbox,
            writer: tokio::sync::Mutex::new(client),
            redis,
        })
    }) else {
        return;
    };
    let bench = Arc::new(bench);

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("outbox");
    const ROWS: usize = 500;
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(10);
    group.bench_function("write_in_one_transaction", |b| {
        let bench = bench.clone();
        b.to_async(&runtime).iter_custom(move |iters| {
            let bench = bench.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += bench.write(ROWS).await;
                }
                // Drain untimed so the table stays small.
                let memory: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
                OutboxRelay::builder_arc(memory, Arc::new(bench.store().await))
                    .build()
                    .unwrap()
                    .drain()
                    .await
                    .unwrap();
                total
            }
        });
    });
    let mut targets: Vec<(&str, Arc<dyn Transport>)> = Vec::new();
    if let Some((redis, _)) = &bench.redis {
        targets.push(("redis", Arc::new(redis.clone())));
    }
    targets.push(("memory", Arc::new(MemoryTransport::new())));
    for (name, transport) in &targets {
        group.bench_function(format!("relay_drain_to_{name}"), |b| {
            let (bench, transport) = (bench.clone(), transport.clone());
            b.to_async(&runtime).iter_custom(move |iters| {
                let (bench, transport) = (bench.clone(), transport.clone());
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += bench.drain(transport.clone(), ROWS, 1, 100).await;
                    }
                    total
                }
            });
        });
    }
    group.finish();
    criterion.final_summary();

    if std::env::args().any(|a| a == "--bench") {
        const N: usize = 5_000;
        runtime.block_on(async {
            let write = bench.write(N).await;
            let memory: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
            OutboxRelay::builder_arc(memory, Arc::new(bench.store().await))
                .build()
                .unwrap()
                .drain()
                .await
                .unwrap();
            println!(
                "outbox write, {N} rows in one transaction: {:.0} rows/s ({write:?})",
                rate(N, write)
            );
            for (name, transport) in &targets {
                for (relays, batch) in [(1, 100), (1, 500), (2, 100)] {
                    let d = bench.drain(transport.clone(), N, relays, batch).await;
                    println!(
                        "outbox relay to {name}, {N} rows, {relays} relay(s), batch {batch}: {:.0} rows/s ({d:?})",
                        rate(N, d)
                    );
                }
            }
        });
    }
    runtime.block_on(bench.cleanup());
}
