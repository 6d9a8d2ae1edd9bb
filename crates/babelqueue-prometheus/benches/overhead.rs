//! What the worker metrics cost per message: 1 000 envelopes published and consumed on
//! `memory://` by one app, without an observer and with [`WorkerMetrics`] recording into the
//! installed Prometheus recorder (one series per queue, URN and outcome), and one rendering of
//! the scrape they leave.
//!
//! `cargo bench -p babelqueue-prometheus --bench overhead`

#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, MemoryTransport};
use babelqueue_prometheus::{Prometheus, WorkerMetrics};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const URN: &str = "urn:babel:orders:created";
const MESSAGES: u64 = 1_000;

fn app(memory: &MemoryTransport, metrics: bool) -> App {
    let mut builder = App::builder(memory.clone())
        .queue("orders")
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) });
    if metrics {
        builder = builder.observer(Arc::new(WorkerMetrics::new()));
    }
    builder.build().expect("app")
}

fn round_trip(c: &mut Criterion) {
    let prometheus = Prometheus::install().expect("the recorder");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("1000 messages published and consumed");
    group.throughput(Throughput::Elements(MESSAGES));
    for (name, metrics) in [("no observer", false), ("worker metrics", true)] {
        let memory = MemoryTransport::new();
        let app = app(&memory, metrics);
        let envelopes: Vec<Envelope> = (0..MESSAGES)
            .map(|n| {
                app.envelope(URN)
                    .data(&serde_json::json!({ "order_id": n }))
                    .build()
                    .expect("an envelope")
            })
            .collect();
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                app.publish_batch("orders", &envelopes)
                    .await
                    .expect("publish");
                let summary = app
                    .consume(Consume::new().max_messages(MESSAGES).handle_signals(false))
                    .await
                    .expect("consume");
                black_box(summary)
            })
        });
    }
    group.finish();
    c.bench_function("render the scrape", |b| {
        b.iter(|| black_box(prometheus.render()))
    });
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
