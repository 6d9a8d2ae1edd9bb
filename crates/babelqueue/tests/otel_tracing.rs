//! The facade's `otel-tracing` feature: `babelqueue::otel::TracingParent` puts the runtime's
//! delivery span into the message's trace (`cargo test -p babelqueue --features otel-tracing`).

#![cfg(feature = "otel-tracing")]

use babelqueue::otel::{TracingParent, trace_id_of};
use babelqueue::{App, Consume, Context, HandlerError, MemoryTransport};
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt as _;

#[tokio::test(flavor = "current_thread")]
async fn the_delivery_span_joins_the_message_trace_through_the_facade() {
    let spans = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("orders")));
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = App::builder(MemoryTransport::new())
        .queue("orders")
        .span_hook(TracingParent::new())
        .handle("urn:babel:orders:created", |_ctx: Context| async {
            Ok::<(), HandlerError>(())
        })
        .build()
        .expect("valid configuration");
    let trace_id = "4bf92f35-77b3-4da6-a3ce-929d0e0e4736";
    let order = app
        .envelope("urn:babel:orders:created")
        .trace_id(trace_id)
        .build()
        .expect("an envelope");
    app.publish_envelope("orders", &order, &Default::default())
        .await
        .expect("published");
    let summary = app
        .consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .expect("consumed");
    assert_eq!(summary.processed, 1);

    let finished = spans.get_finished_spans().expect("spans");
    let consumer = finished
        .iter()
        .find(|s| s.span_kind == SpanKind::Consumer)
        .expect("a CONSUMER span");
    assert_eq!(consumer.name, "process urn:babel:orders:created");
    assert_eq!(consumer.span_context.trace_id(), trace_id_of(trace_id));
}
