//! Per-message cost of tracing: the header inject and extract, the `trace_id` mapping, and the
//! span work around a publish and a handler call, each beside its untraced baseline.
//!
//! `cargo bench -p babelqueue-otel --bench overhead`. The spans go to an SDK tracer provider
//! with a simple processor and an exporter that drops them (sampled, recorded, exported), so the
//! figures include the SDK's own span bookkeeping.

#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use babelqueue_core::{
    App, Context, Envelope, Handler, HandlerError, Headers, MemoryTransport, Transport,
};
use babelqueue_otel::{Otel, extract, inject, trace_id_of};
use criterion::{Criterion, criterion_group, criterion_main};
use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState, TracerProvider};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};

const URN: &str = "urn:babel:orders:created";
const TRACE_ID: &str = "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b";

/// Accepts every span and keeps none.
#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

fn pieces(c: &mut Criterion) {
    let span_context = SpanContext::new(
        TraceId::from(0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736u128),
        SpanId::from(0x00f0_67aa_0ba9_02b7u64),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    let mut carried = Headers::new();
    inject(&span_context, &mut carried);

    let mut group = c.benchmark_group("pieces");
    group.bench_function("inject traceparent", |b| {
        b.iter(|| {
            let mut headers = Headers::new();
            inject(black_box(&span_context), &mut headers);
            headers
        })
    });
    group.bench_function("extract traceparent", |b| {
        b.iter(|| extract(black_box(&carried), Some(TRACE_ID)))
    });
    group.bench_function("extract fallback (no header)", |b| {
        let empty = Headers::new();
        b.iter(|| extract(black_box(&empty), Some(TRACE_ID)))
    });
    group.bench_function("trace_id_of uuid", |b| {
        b.iter(|| trace_id_of(black_box(TRACE_ID)))
    });
    group.bench_function("trace_id_of hashed", |b| {
        b.iter(|| trace_id_of(black_box("order-1042")))
    });
    group.finish();
}

fn per_message(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(Discard)
        .build();
    let otel = Otel::new(provider.tracer("bench"));
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone()).queue("bench").build().unwrap();
    let data = serde_json::json!({"order_id": 1042});

    let mut group = c.benchmark_group("per message");
    group.bench_function("publish (plain)", |b| {
        b.to_async(&rt).iter(|| async {
            app.publish(URN, &data).await.unwrap();
            take(&memory).await;
        })
    });
    group.bench_function("publish (producer span + traceparent)", |b| {
        b.to_async(&rt).iter(|| async {
            otel.publish(&app, URN, &data).await.unwrap();
            take(&memory).await;
        })
    });

    let envelope = Envelope::builder(URN)
        .queue("bench")
        .trace_id(TRACE_ID)
        .build()
        .unwrap();
    let mut headers = Headers::new();
    headers.insert(
        "traceparent".into(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
    );
    let ctx = Context::new(envelope, "bench", headers);
    let plain = |_ctx: Context| async { Ok::<(), HandlerError>(()) };
    let traced = otel.handler(plain);
    group.bench_function("handler call (plain)", |b| {
        b.to_async(&rt)
            .iter(|| async { Handler::call(&plain, ctx.clone()).await.unwrap() })
    });
    group.bench_function("handler call (consumer span, header parent)", |b| {
        b.to_async(&rt)
            .iter(|| async { Handler::call(&traced, ctx.clone()).await.unwrap() })
    });
    group.finish();
}

/// Takes the message back off the queue, so memory stays flat over millions of iterations
/// (the same cost in both variants).
async fn take(memory: &MemoryTransport) {
    let delivery = memory.pop("bench", Duration::ZERO).await.unwrap().unwrap();
    memory.ack(&delivery).await.unwrap();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = pieces, per_message
}
criterion_main!(benches);
