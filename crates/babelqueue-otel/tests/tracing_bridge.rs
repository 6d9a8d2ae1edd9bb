//! The `tracing` path (feature `tracing`): the runtime's `babelqueue.handle` span, exported by
//! tracing-opentelemetry with `TracingParent` as the app's span hook, lands in the message's
//! trace. Recorded by the SDK's in-memory span exporter, on the in-memory transport.
#![cfg(feature = "tracing")]

use babelqueue_core::{App, AppBuilder, Consume, Context, HandlerError, Headers, MemoryTransport};
use babelqueue_otel::{
    HEADER_TRACEPARENT, TraceParent, TracingParent, synthetic_span_id, trace_id_of,
};
use opentelemetry::Value;
use opentelemetry::trace::{SpanId, SpanKind, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt as _;

const URN: &str = "urn:babel:orders:created";
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// tracing-opentelemetry over an SDK provider that keeps finished spans in memory; the
/// subscriber is this thread's default until the value is dropped.
struct Exported {
    spans: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    _guard: tracing::subscriber::DefaultGuard,
}

fn exported() -> Exported {
    let spans = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let guard = tracing::subscriber::set_default(subscriber);
    Exported {
        spans,
        _provider: provider,
        _guard: guard,
    }
}

impl Exported {
    fn named(&self, name: &str) -> Vec<SpanData> {
        self.spans
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|s| s.name == name)
            .collect()
    }
    fn consumer(&self, urn: &str) -> SpanData {
        let mut found = self.named(&format!("process {urn}"));
        assert_eq!(found.len(), 1, "one consumer span for {urn}");
        found.remove(0)
    }
}

fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn s(v: &str) -> Option<Value> {
    Some(Value::from(v.to_owned()))
}

fn app(memory: &MemoryTransport) -> AppBuilder {
    App::builder(memory.clone())
        .queue("orders")
        .span_hook(TracingParent::new())
}

fn once() -> Consume {
    Consume::new().max_messages(1).handle_signals(false)
}

#[tokio::test]
async fn without_a_header_the_span_joins_the_trace_id_trace() {
    let otel = exported();
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let trace_id = "4bf92f35-77b3-4da6-a3ce-929d0e0e4736";
    let envelope = app.envelope(URN).trace_id(trace_id).build().unwrap();
    app.publish_envelope("orders", &envelope, &Headers::new())
        .await
        .unwrap();
    app.consume(once()).await.unwrap();

    let span = otel.consumer(URN);
    assert_eq!(
        span.span_context.trace_id(),
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        "the exported span carries the message's trace id"
    );
    assert_eq!(span.span_context.trace_id(), trace_id_of(trace_id));
    assert_eq!(span.parent_span_id, synthetic_span_id(trace_id));
    assert_eq!(span.span_kind, SpanKind::Consumer);
    assert_eq!(
        attr(&span, "messaging.babelqueue.parent_source"),
        s("trace_id")
    );
    assert_eq!(attr(&span, "messaging.system"), s("babelqueue"));
    assert_eq!(attr(&span, "messaging.destination.name"), s("orders"));
    assert_eq!(attr(&span, "messaging.babelqueue.urn"), s(URN));
    assert_eq!(
        attr(&span, "messaging.message.id"),
        s(&envelope.message_id().unwrap())
    );
    assert_eq!(
        attr(&span, "messaging.message.conversation_id"),
        s(trace_id)
    );
    assert_eq!(
        attr(&span, "messaging.babelqueue.attempts"),
        Some(Value::I64(0))
    );
}

#[tokio::test]
async fn a_non_uuid_trace_id_is_hashed_like_the_other_sdks_do() {
    let otel = exported();
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let envelope = app.envelope(URN).trace_id("order-1042").build().unwrap();
    app.publish_envelope("orders", &envelope, &Headers::new())
        .await
        .unwrap();
    app.consume(once()).await.unwrap();
    let span = otel.consumer(URN);
    assert_eq!(span.span_context.trace_id(), trace_id_of("order-1042"));
    assert_eq!(span.parent_span_id, synthetic_span_id("order-1042"));
}

#[tokio::test]
async fn a_traceparent_header_makes_the_producer_span_the_parent() {
    let otel = exported();
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let envelope = app.envelope(URN).build().unwrap();
    let headers = Headers::from([(HEADER_TRACEPARENT.to_owned(), TRACEPARENT.to_owned())]);
    app.publish_envelope("orders", &envelope, &headers)
        .await
        .unwrap();
    app.consume(once()).await.unwrap();

    let span = otel.consumer(URN);
    assert_eq!(
        span.span_context.trace_id(),
        TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap()
    );
    assert_eq!(
        span.parent_span_id,
        SpanId::from_hex("b7ad6b7169203331").unwrap()
    );
    assert!(span.parent_span_is_remote);
    assert_eq!(
        attr(&span, "messaging.babelqueue.parent_source"),
        s("traceparent")
    );
}

#[tokio::test]
async fn the_handlers_spans_and_publishes_continue_from_the_delivery_span() {
    let otel = exported();
    let memory = MemoryTransport::new();
    let follow_up = "urn:babel:emails:send";
    let app = app(&memory)
        .handle(URN, move |ctx: Context| async move {
            tracing::info_span!("charge").in_scope(|| tracing::info!("charging the card"));
            ctx.publish_to("emails", follow_up, &serde_json::json!({}))
                .await
                .map_err(|e| HandlerError::new(e.to_string()))?;
            Ok(())
        })
        .handle(follow_up, |_ctx: Context| async {
            Ok::<(), HandlerError>(())
        })
        .build()
        .unwrap();
    let trace_id = "4bf92f35-77b3-4da6-a3ce-929d0e0e4736";
    let envelope = app.envelope(URN).trace_id(trace_id).build().unwrap();
    app.publish_envelope("orders", &envelope, &Headers::new())
        .await
        .unwrap();
    app.consume(once()).await.unwrap();

    // The follow-up carries the delivery span's traceparent and the same trace_id.
    let headers = memory.headers_of("emails");
    let sent = TraceParent::parse(&headers[0][HEADER_TRACEPARENT]).expect("a traceparent");
    app.consume(once().queue("emails")).await.unwrap();

    let handled = otel.consumer(URN);
    let charge = otel.named("charge").remove(0);
    let emailed = otel.consumer(follow_up);
    assert_eq!(charge.parent_span_id, handled.span_context.span_id());
    assert_eq!(sent.parent_id, handled.span_context.span_id());
    assert_eq!(emailed.parent_span_id, handled.span_context.span_id());
    for span in [&charge, &emailed] {
        assert_eq!(span.span_context.trace_id(), trace_id_of(trace_id));
    }
    assert_eq!(
        attr(&emailed, "messaging.message.conversation_id"),
        s(trace_id)
    );
    assert!(
        handled.events.iter().all(|e| e.name != "charging the card"),
        "the event belongs to the inner span"
    );
    assert!(charge.events.iter().any(|e| e.name == "charging the card"));
}
