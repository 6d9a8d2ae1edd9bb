//! Messages per second of the Azure Service Bus binding with the runtime in front, over the
//! in-memory fake client: the typed projection, the gate, the reconciliation and PeekLock
//! settling, without a network (no Service Bus namespace or emulator runs on the project's
//! machines, so there is no live figure).
//!
//! `cargo bench -p babelqueue-transport-asb --bench throughput` prints criterion's figures,
//! then a messages/s line.

#![allow(missing_docs, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, Transport};
use babelqueue_transport_asb::AsbTransport;
use babelqueue_transport_asb::fake::FakeServiceBus;
use criterion::{Criterion, Throughput};

const URN: &str = "urn:babel:orders:created";
const BATCH: u64 = 2_000;

fn app(transport: AsbTransport) -> App {
    App::builder(transport)
        .queue("orders")
        .poll_timeout(Duration::from_millis(1))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .expect("valid configuration")
}

/// Publishes `n` messages through the transport, then consumes them all; the time of both.
async fn round(n: u64) -> Duration {
    let transport = AsbTransport::with_client(Arc::new(FakeServiceBus::new()));
    let app = app(transport.clone());
    let body = app
        .envelope(URN)
        .data(&serde_json::json!({"order_id": 1042, "total": 99.9}))
        .build()
        .unwrap()
        .encode()
        .unwrap();
    let started = Instant::now();
    for _ in 0..n {
        transport.publish("orders", body.as_bytes()).await.unwrap();
    }
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
    let mut group = criterion.benchmark_group("asb_fake_client");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(10);
    group.bench_function("publish_then_consume_noop", |b| {
        b.to_async(&runtime).iter_custom(|iters| async move {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += round(BATCH).await;
            }
            total
        });
    });
    group.finish();
    criterion.final_summary();

    if std::env::args().any(|a| a == "--bench") {
        let n = 20_000;
        let took = runtime.block_on(round(n));
        println!(
            "asb binding + runtime over the fake client (no network): {n} published and consumed in {took:?} = {:.0} messages/s",
            n as f64 / took.as_secs_f64()
        );
    }
}
