//! PRODUCER/CONSUMER spans through the real runtime on the in-memory transport (no broker),
//! recorded by the SDK's in-memory span exporter.

use std::sync::{Arc, Mutex};

use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, Headers, MemoryTransport};
use babelqueue_otel::{HEADER_TRACEPARENT, Otel, synthetic_span_id, trace_id_of, traced, uuid_of};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracer, SdkTracerProvider, SpanData};

const URN: &str = "urn:babel:orders:created";
const QUEUE: &str = "orders";

struct Tracing {
    spans: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    otel: Otel<SdkTracer>,
}

fn tracing() -> Tracing {
    let spans = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let otel = Otel::new(provider.tracer("test"));
    Tracing {
        spans,
        _provider: provider,
        otel,
    }
}

impl Tracing {
    fn finished(&self) -> Vec<SpanData> {
        self.spans.get_finished_spans().unwrap()
    }
    fn one(&self, kind: &SpanKind) -> SpanData {
        let mut found: Vec<SpanData> = self
            .finished()
            .into_iter()
            .filter(|s| &s.span_kind == kind)
            .collect();
        assert_eq!(found.len(), 1, "expected one {kind:?} span: {found:?}");
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

/// One handler call: its headers and envelope trace_id.
type Call = (Headers, Option<String>);

/// What the handler saw, call by call.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Call>>>);

impl Seen {
    fn handler(&self, fail: bool) -> impl babelqueue_core::Handler + Clone {
        let seen = self.clone();
        move |ctx: Context| {
            let seen = seen.clone();
            async move {
                seen.0.lock().unwrap().push((
                    ctx.headers().clone(),
                    ctx.trace_id().map(|t| t.into_owned()),
                ));
                if fail {
                    Err(HandlerError::new("payment service down").with_exception("Downstream"))
                } else {
                    Ok(())
                }
            }
        }
    }
    fn all(&self) -> Vec<Call> {
        self.0.lock().unwrap().clone()
    }
}

fn once() -> Consume {
    Consume::new().max_messages(1).handle_signals(false)
}

#[tokio::test]
async fn the_consumer_span_is_the_child_of_the_producer_span() {
    let t = tracing();
    let seen = Seen::default();
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .handle(URN, t.otel.handler(seen.handler(false)))
        .build()
        .unwrap();
    let id = t
        .otel
        .publish(&app, URN, &serde_json::json!({"order_id": 1042}))
        .await
        .unwrap();
    app.consume(once()).await.unwrap();

    let producer = t.one(&SpanKind::Producer);
    let consumer = t.one(&SpanKind::Consumer);
    assert_eq!(producer.name, format!("publish {URN}"));
    assert_eq!(consumer.name, format!("process {URN}"));
    assert_eq!(
        consumer.span_context.trace_id(),
        producer.span_context.trace_id()
    );
    assert_eq!(consumer.parent_span_id, producer.span_context.span_id());
    assert!(consumer.parent_span_is_remote);

    // The envelope's trace_id is the producer's trace, as a UUID; the header rode beside it.
    let trace_uuid = uuid_of(producer.span_context.trace_id());
    let (headers, trace_id) = seen.all().remove(0);
    assert_eq!(trace_id.as_deref(), Some(trace_uuid.as_str()));
    assert_eq!(
        headers[HEADER_TRACEPARENT],
        format!(
            "00-{:032x}-{:016x}-01",
            producer.span_context.trace_id(),
            producer.span_context.span_id()
        )
    );

    for (span, operation) in [(&producer, "publish"), (&consumer, "process")] {
        assert_eq!(attr(span, "messaging.system"), s("babelqueue"));
        assert_eq!(attr(span, "messaging.operation"), s(operation));
        assert_eq!(attr(span, "messaging.operation.name"), s(operation));
        assert_eq!(attr(span, "messaging.destination.name"), s(QUEUE));
        assert_eq!(attr(span, "messaging.babelqueue.urn"), s(URN));
        assert_eq!(attr(span, "messaging.message.id"), s(&id));
        assert_eq!(
            attr(span, "messaging.message.conversation_id"),
            s(&trace_uuid)
        );
        assert_eq!(span.status, Status::Unset);
    }
    assert_eq!(attr(&producer, "messaging.operation.type"), s("send"));
    assert_eq!(attr(&consumer, "messaging.operation.type"), s("process"));
    assert_eq!(
        attr(&consumer, "messaging.babelqueue.attempts"),
        Some(Value::I64(0))
    );
    assert_eq!(
        attr(&consumer, "messaging.babelqueue.parent_source"),
        s("traceparent")
    );
}

#[tokio::test]
async fn without_a_header_the_consumer_joins_the_trace_id_trace() {
    let t = tracing();
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .handle(URN, t.otel.handler(Seen::default().handler(false)))
        .build()
        .unwrap();
    // A producer without OpenTelemetry: a plain publish, a trace_id that is not a UUID.
    let envelope = Envelope::builder(URN)
        .queue(QUEUE)
        .trace_id("order-1042")
        .build()
        .unwrap();
    app.publish_envelope(QUEUE, &envelope, &Headers::new())
        .await
        .unwrap();
    app.consume(once()).await.unwrap();

    let consumer = t.one(&SpanKind::Consumer);
    assert_eq!(consumer.span_context.trace_id(), trace_id_of("order-1042"));
    assert_eq!(consumer.parent_span_id, synthetic_span_id("order-1042"));
    assert_eq!(
        attr(&consumer, "messaging.babelqueue.parent_source"),
        s("trace_id")
    );
}

#[tokio::test]
async fn a_malformed_header_is_ignored_and_the_trace_id_decides() {
    let t = tracing();
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .handle(URN, t.otel.handler(Seen::default().handler(false)))
        .build()
        .unwrap();
    let trace = "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b";
    let envelope = Envelope::builder(URN)
        .queue(QUEUE)
        .trace_id(trace)
        .build()
        .unwrap();
    let headers = Headers::from([(
        HEADER_TRACEPARENT.to_owned(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra".to_owned(),
    )]);
    app.publish_envelope(QUEUE, &envelope, &headers)
        .await
        .unwrap();
    app.consume(once()).await.unwrap();
    let consumer = t.one(&SpanKind::Consumer);
    assert_eq!(
        format!("{:032x}", consumer.span_context.trace_id()),
        "7b3f9c2ae41d4f889b2a1c0d5e6f7a8b"
    );
    assert_eq!(consumer.parent_span_id, synthetic_span_id(trace));
}

#[tokio::test]
async fn a_failing_handler_marks_its_span_and_is_still_retried() {
    let t = tracing();
    let seen = Seen::default();
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .max_attempts(2)
        .dead_letter(true)
        .handle(URN, t.otel.handler(seen.handler(true)))
        .build()
        .unwrap();
    t.otel
        .publish(&app, URN, &serde_json::json!({}))
        .await
        .unwrap();
    app.consume(Consume::new().max_messages(2).handle_signals(false))
        .await
        .unwrap();

    // Two deliveries (the retry kept the header), then the dead-letter queue.
    assert_eq!(seen.all().len(), 2);
    assert!(seen.all()[1].0.contains_key(HEADER_TRACEPARENT));
    assert_eq!(memory.len("orders.dlq"), 1);
    let producer = t.one(&SpanKind::Producer);
    let consumers: Vec<SpanData> = t
        .finished()
        .into_iter()
        .filter(|s| s.span_kind == SpanKind::Consumer)
        .collect();
    assert_eq!(consumers.len(), 2);
    for (attempt, span) in consumers.iter().enumerate() {
        assert_eq!(span.parent_span_id, producer.span_context.span_id());
        assert_eq!(
            span.status,
            Status::error("payment service down"),
            "{span:?}"
        );
        assert_eq!(attr(span, "error.type"), s("Downstream"));
        let event = span
            .events
            .iter()
            .find(|e| e.name == "exception")
            .expect("an exception event");
        assert!(
            event
                .attributes
                .contains(&KeyValue::new("exception.type", "Downstream"))
        );
        assert!(
            event
                .attributes
                .contains(&KeyValue::new("exception.message", "payment service down"))
        );
        assert_eq!(
            attr(span, "messaging.babelqueue.attempts"),
            Some(Value::I64(i64::try_from(attempt).unwrap()))
        );
    }
}

#[tokio::test]
async fn a_publish_from_a_traced_handler_continues_the_trace() {
    let t = tracing();
    let memory = MemoryTransport::new();
    let follow_up = "urn:babel:emails:send";
    let app = App::builder(memory.clone()).queue(QUEUE).build().unwrap();
    let inner_app = app.clone();
    let inner_otel = t.otel.clone();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .handle(
            URN,
            t.otel.handler(move |_ctx: Context| {
                let (app, otel) = (inner_app.clone(), inner_otel.clone());
                async move {
                    otel.publish_to(&app, "emails", follow_up, &serde_json::json!({}))
                        .await
                        .map_err(|e| HandlerError::new(e.to_string()))?;
                    Ok(())
                }
            }),
        )
        .handle(follow_up, t.otel.handler(Seen::default().handler(false)))
        .build()
        .unwrap();
    t.otel
        .publish(&app, URN, &serde_json::json!({}))
        .await
        .unwrap();
    app.consume(once()).await.unwrap();
    app.consume(once().queue("emails")).await.unwrap();

    let spans = t.finished();
    let by_name = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:?}"))
    };
    let first = by_name(&format!("publish {URN}"));
    let handled = by_name(&format!("process {URN}"));
    let second = by_name(&format!("publish {follow_up}"));
    let emailed = by_name(&format!("process {follow_up}"));
    // One trace, four spans, each the parent of the next.
    for span in [handled, second, emailed] {
        assert_eq!(span.span_context.trace_id(), first.span_context.trace_id());
    }
    assert_eq!(handled.parent_span_id, first.span_context.span_id());
    assert_eq!(second.parent_span_id, handled.span_context.span_id());
    assert!(!second.parent_span_is_remote);
    assert_eq!(emailed.parent_span_id, second.span_context.span_id());
    assert_eq!(attr(second, "messaging.destination.name"), s("emails"));
}

#[tokio::test]
async fn a_plain_publish_from_a_traced_handler_continues_from_the_consumer_span() {
    let t = tracing();
    let memory = MemoryTransport::new();
    let follow_up = "urn:babel:emails:send";
    let seen = Seen::default();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .handle(
            URN,
            t.otel.handler(move |ctx: Context| async move {
                // No Otel call: the runtime's trace continuation does it.
                ctx.publish_to("emails", follow_up, &serde_json::json!({}))
                    .await
                    .map_err(|e| HandlerError::new(e.to_string()))?;
                let app = ctx.app().expect("an app").clone();
                app.publish_to("emails", follow_up, &serde_json::json!({}))
                    .await
                    .map_err(|e| HandlerError::new(e.to_string()))?;
                Ok(())
            }),
        )
        .handle(follow_up, t.otel.handler(seen.handler(false)))
        .build()
        .unwrap();
    t.otel
        .publish(&app, URN, &serde_json::json!({}))
        .await
        .unwrap();
    app.consume(once()).await.unwrap();
    app.consume(
        Consume::new()
            .queue("emails")
            .max_messages(2)
            .handle_signals(false),
    )
    .await
    .unwrap();

    let spans = t.finished();
    let handled = spans
        .iter()
        .find(|s| s.name == format!("process {URN}"))
        .expect("the first consumer span");
    let emailed: Vec<_> = spans
        .iter()
        .filter(|s| s.name == format!("process {follow_up}"))
        .collect();
    assert_eq!(emailed.len(), 2);
    for span in emailed {
        assert_eq!(
            span.span_context.trace_id(),
            handled.span_context.trace_id()
        );
        assert_eq!(span.parent_span_id, handled.span_context.span_id());
        assert_eq!(
            attr(span, "messaging.babelqueue.parent_source"),
            s("traceparent")
        );
    }
    let trace = uuid_of(handled.span_context.trace_id());
    for (_, trace_id) in seen.all() {
        assert_eq!(trace_id.as_deref(), Some(trace.as_str()));
    }
}

#[tokio::test]
async fn publish_envelope_keeps_the_envelope_and_joins_its_trace() {
    let t = tracing();
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone()).queue(QUEUE).build().unwrap();
    let trace = "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b";
    let envelope = Envelope::builder(URN)
        .queue(QUEUE)
        .trace_id(trace)
        .build()
        .unwrap();
    let extra = Headers::from([("bq-replay-bypass".to_owned(), "1".to_owned())]);
    t.otel
        .publish_envelope(&app, QUEUE, &envelope, &extra)
        .await
        .unwrap();
    let producer = t.one(&SpanKind::Producer);
    assert_eq!(producer.span_context.trace_id(), trace_id_of(trace));
    assert_eq!(producer.parent_span_id, synthetic_span_id(trace));
    assert_eq!(
        memory.bodies(QUEUE),
        vec![envelope.encode().unwrap().into_bytes()]
    );
    let headers = memory.headers_of(QUEUE).remove(0);
    assert_eq!(headers["bq-replay-bypass"], "1");
    assert!(
        headers[HEADER_TRACEPARENT].contains(&format!("{:016x}", producer.span_context.span_id()))
    );
}

#[tokio::test]
async fn caller_headers_win_over_the_injected_ones() {
    let t = tracing();
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone()).queue(QUEUE).build().unwrap();
    let mine = "00-11111111111111111111111111111111-2222222222222222-01";
    let headers = Headers::from([(HEADER_TRACEPARENT.to_owned(), mine.to_owned())]);
    t.otel
        .publish_builder(
            &app,
            QUEUE,
            Envelope::builder(URN).queue(QUEUE),
            URN,
            &headers,
        )
        .await
        .unwrap();
    assert_eq!(memory.headers_of(QUEUE)[0][HEADER_TRACEPARENT], mine);
}

#[tokio::test]
async fn a_failed_publish_marks_the_producer_span() {
    let t = tracing();
    let memory = MemoryTransport::new();
    memory.fail_publishes_to(QUEUE, true);
    let app = App::builder(memory.clone()).queue(QUEUE).build().unwrap();
    let err = t
        .otel
        .publish(&app, URN, &serde_json::json!({}))
        .await
        .unwrap_err();
    let producer = t.one(&SpanKind::Producer);
    assert!(
        matches!(producer.status, Status::Error { .. }),
        "{producer:?}"
    );
    assert_eq!(
        producer
            .events
            .iter()
            .filter(|e| e.name == "exception")
            .count(),
        1
    );
    assert_eq!(
        attr(&producer, "error.type"),
        s(&format!("{:?}", err.kind()))
    );
    // A refused envelope (blank URN) fails before anything is sent, and is recorded too.
    t.spans.reset();
    assert!(
        t.otel
            .publish(&app, "  ", &serde_json::json!({}))
            .await
            .is_err()
    );
    assert!(matches!(
        t.one(&SpanKind::Producer).status,
        Status::Error { .. }
    ));
}

#[tokio::test]
async fn a_not_sampled_parent_yields_an_unsampled_consumer() {
    let t = tracing();
    let memory = MemoryTransport::new();
    let seen = Seen::default();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .handle(URN, t.otel.handler(seen.handler(false)))
        .build()
        .unwrap();
    let headers = Headers::from([(
        HEADER_TRACEPARENT.to_owned(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".to_owned(),
    )]);
    let envelope = Envelope::builder(URN).queue(QUEUE).build().unwrap();
    app.publish_envelope(QUEUE, &envelope, &headers)
        .await
        .unwrap();
    app.consume(once()).await.unwrap();
    // The handler ran, but the parent-based sampler recorded nothing.
    assert_eq!(seen.all().len(), 1);
    assert!(t.finished().is_empty());
}

#[tokio::test]
async fn a_noop_tracer_publishes_plainly() {
    // No provider installed: the global tracer is a no-op.
    let otel = Otel::global();
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone()).queue(QUEUE).build().unwrap();
    otel.publish(&app, URN, &serde_json::json!({}))
        .await
        .unwrap();
    assert!(memory.headers_of(QUEUE)[0].is_empty());
    let body = memory.bodies(QUEUE).remove(0);
    let envelope = Envelope::decode(&body).unwrap().envelope;
    let trace_id = envelope.trace_id().unwrap().into_owned();
    assert_ne!(trace_id, "00000000-0000-0000-0000-000000000000");
    assert_eq!(trace_id.len(), 36);
}

#[tokio::test]
async fn traced_takes_a_shared_tracer_and_the_span_is_current_in_the_handler() {
    let t = tracing();
    let tracer = Arc::new(t.otel.tracer().clone());
    let current: Arc<Mutex<Option<opentelemetry::trace::SpanContext>>> = Arc::default();
    let c = current.clone();
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue(QUEUE)
        .handle(
            URN,
            traced(tracer, move |_ctx: Context| {
                let c = c.clone();
                async move {
                    *c.lock().unwrap() = Some(
                        opentelemetry::Context::current()
                            .span()
                            .span_context()
                            .clone(),
                    );
                    Ok::<(), HandlerError>(())
                }
            }),
        )
        .build()
        .unwrap();
    app.publish(URN, &serde_json::json!({})).await.unwrap();
    app.consume(once()).await.unwrap();
    let consumer = t.one(&SpanKind::Consumer);
    assert_eq!(
        current.lock().unwrap().clone().unwrap(),
        consumer.span_context
    );
}
