//! The span around every handler call (`babelqueue.handle`), the span hook, and trace
//! continuation for what a handler publishes, on `memory://`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::app::trace::{SPAN_NAME, SPAN_TARGET};
use babelqueue_core::{
    App, AppBuilder, Consume, Context, Envelope, HandlerError, Headers, MemoryTransport, SpanHook,
};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

const URN: &str = "urn:babel:orders:created";
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn app(memory: &MemoryTransport) -> AppBuilder {
    App::builder(memory.clone())
        .queue("orders")
        .poll_timeout(Duration::from_millis(20))
}

fn drain() -> Consume {
    Consume::new().max_messages(100).handle_signals(false)
}

fn fail(e: &babelqueue_core::Error) -> HandlerError {
    HandlerError::new(e.to_string())
}

fn trace_id_of(body: &[u8]) -> String {
    Envelope::decode(body)
        .expect("an envelope")
        .envelope
        .trace_id()
        .expect("a trace_id")
        .into_owned()
}

// ---- a capturing layer ---------------------------------------------------------------------

type Fields = BTreeMap<String, String>;

#[derive(Default)]
struct FieldsOf(Fields);

impl Visit for FieldsOf {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// An event's message, and the name and fields of the span it happened in.
type SeenEvent = (String, Option<(String, Fields)>);

/// What the layer saw: spans by name with their fields, and events with their span.
#[derive(Clone, Default)]
struct Seen {
    spans: Arc<Mutex<Vec<(String, String, Fields)>>>,
    /// (message, the enclosing span's name, its fields)
    events: Arc<Mutex<Vec<SeenEvent>>>,
}

struct Capture(Seen);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: LayerContext<'_, S>) {
        let mut fields = FieldsOf::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields.0);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: LayerContext<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let mut fields = FieldsOf::default();
            values.record(&mut fields);
            if let Some(known) = span.extensions_mut().get_mut::<Fields>() {
                known.extend(fields.0);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: LayerContext<'_, S>) {
        let mut fields = FieldsOf::default();
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or_default();
        let span = ctx.event_span(event).map(|s| {
            let fields = s.extensions().get::<Fields>().cloned().unwrap_or_default();
            (s.name().to_owned(), fields)
        });
        self.0.events.lock().unwrap().push((message, span));
    }

    fn on_close(&self, id: Id, ctx: LayerContext<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span
                .extensions()
                .get::<Fields>()
                .cloned()
                .unwrap_or_default();
            self.0.spans.lock().unwrap().push((
                span.name().to_owned(),
                span.metadata().target().to_owned(),
                fields,
            ));
        }
    }
}

/// The tests of this file run one at a time: `tracing` caches each callsite's interest across
/// threads, and thread-local subscribers set and dropped in parallel can leave it stale.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Captured {
    seen: Seen,
    _subscriber: tracing::subscriber::DefaultGuard,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

async fn capture() -> Captured {
    let turn = ONE_AT_A_TIME.lock().await;
    let seen = Seen::default();
    let subscriber = Registry::default().with(Capture(seen.clone()));
    // Thread-local: #[tokio::test] runs the whole test on this thread.
    let guard = tracing::subscriber::set_default(subscriber);
    Captured {
        seen,
        _subscriber: guard,
        _turn: turn,
    }
}

// ---- 1. the span around every handler call ---------------------------------------------------

#[tokio::test]
async fn every_handler_call_runs_in_a_span_with_the_delivery_fields() {
    let Captured { seen, .. } = &capture().await;
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .handle(URN, |_ctx: Context| async {
            tracing::info!("charging the card");
            Ok::<(), HandlerError>(())
        })
        .build()
        .unwrap();
    let envelope = app
        .envelope(URN)
        .trace_id("trace-42")
        .data(&json!({"order_id": 1}))
        .build()
        .unwrap();
    let id = envelope.message_id().unwrap().into_owned();
    app.publish_envelope("orders", &envelope, &Headers::new())
        .await
        .unwrap();
    app.consume(drain()).await.unwrap();

    let expected: Fields = [
        ("queue", "orders"),
        ("urn", URN),
        ("message_id", id.as_str()),
        ("trace_id", "trace-42"),
        ("attempts", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let spans = seen.spans.lock().unwrap().clone();
    let handle: Vec<_> = spans.iter().filter(|s| s.0 == SPAN_NAME).collect();
    assert_eq!(handle.len(), 1, "one span per handler call: {spans:?}");
    assert_eq!(handle[0].1, SPAN_TARGET);
    assert_eq!(handle[0].2, expected);

    let events = seen.events.lock().unwrap().clone();
    let charging = events
        .iter()
        .find(|(message, _)| message == "charging the card")
        .expect("the handler's event was seen");
    assert_eq!(
        charging.1,
        Some((SPAN_NAME.to_owned(), expected)),
        "the handler's log line is inside the delivery span"
    );
}

#[tokio::test]
async fn a_retry_shows_its_attempts_on_the_span() {
    let Captured { seen, .. } = &capture().await;
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .max_attempts(2)
        .handle(URN, |ctx: Context| async move {
            if ctx.attempts() == 0 {
                Err(HandlerError::new("first time fails"))
            } else {
                Ok(())
            }
        })
        .build()
        .unwrap();
    app.publish(URN, &json!({})).await.unwrap();
    app.consume(drain()).await.unwrap();
    let attempts: Vec<String> = seen
        .spans
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.0 == SPAN_NAME)
        .map(|s| s.2["attempts"].clone())
        .collect();
    assert_eq!(attempts, ["0", "1"]);
}

#[derive(Default)]
struct Named(AtomicUsize);

impl SpanHook for Named {
    fn on_span(&self, span: &tracing::Span, ctx: &Context) {
        self.0.fetch_add(1, Ordering::SeqCst);
        span.record("otel.name", format!("process {}", ctx.urn()));
    }
}

struct Shared(Arc<Named>);

impl SpanHook for Shared {
    fn on_span(&self, span: &tracing::Span, ctx: &Context) {
        self.0.on_span(span, ctx);
    }
}

#[tokio::test]
async fn the_hook_sees_each_span_before_the_handler_runs() {
    let hook = Arc::new(Named::default());
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .span_hook(Shared(hook.clone()))
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let Captured { seen, .. } = &capture().await;
    app.publish(URN, &json!({})).await.unwrap();
    app.consume(drain()).await.unwrap();
    assert_eq!(hook.0.load(Ordering::SeqCst), 1);
    let spans = seen.spans.lock().unwrap().clone();
    let name = spans
        .iter()
        .find(|s| s.0 == SPAN_NAME)
        .and_then(|s| s.2.get("otel.name").cloned());
    assert_eq!(name.as_deref(), Some("process urn:babel:orders:created"));
}

// ---- 3. trace continuation -----------------------------------------------------------------

#[derive(serde::Serialize)]
struct Shipped {
    #[serde(skip)]
    trace: Option<String>,
    order_id: u64,
}

impl babelqueue_core::Message for Shipped {
    const URN: &'static str = "urn:babel:orders:shipped";
    fn trace_id(&self) -> Option<&str> {
        self.trace.as_deref()
    }
}

/// Publishes `urn` to `queue` inside a handler with a `traceparent`, then runs the handler
/// `publish` once.
async fn continue_from<F, Fut>(memory: &MemoryTransport, publish: F) -> String
where
    F: Fn(Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), babelqueue_core::Error>> + Send + 'static,
{
    let _turn = ONE_AT_A_TIME.lock().await;
    let handled = Arc::new(AtomicBool::new(false));
    let h = handled.clone();
    let app = app(memory)
        .handle(URN, move |ctx: Context| {
            let done = publish(ctx);
            let h = h.clone();
            async move {
                done.await.map_err(|e| fail(&e))?;
                h.store(true, Ordering::SeqCst);
                Ok(())
            }
        })
        .build()
        .unwrap();
    let incoming = app
        .envelope(URN)
        .data(&json!({"order_id": 7}))
        .build()
        .unwrap();
    let mut headers = Headers::new();
    headers.insert("traceparent".into(), TRACEPARENT.into());
    app.publish_envelope("orders", &incoming, &headers)
        .await
        .unwrap();
    // One delivery: what the handler publishes to "orders" stays there to be looked at.
    let once = Consume::new().max_messages(1).handle_signals(false);
    assert_eq!(app.consume(once).await.unwrap().processed, 1);
    assert!(handled.load(Ordering::SeqCst), "the handler succeeded");
    incoming.trace_id().unwrap().into_owned()
}

#[tokio::test]
async fn publishing_through_the_context_continues_the_trace() {
    let memory = MemoryTransport::new();
    let incoming = continue_from(&memory, |ctx| async move {
        ctx.publish_to("out", "urn:babel:mail:confirm", &json!({}))
            .await?;
        ctx.publish_message(&Shipped {
            trace: None,
            order_id: 7,
        })
        .await?;
        Ok(())
    })
    .await;
    for queue in ["out", "orders"] {
        let bodies = memory.bodies(queue);
        assert_eq!(bodies.len(), 1, "{queue}");
        assert_eq!(trace_id_of(&bodies[0]), incoming, "{queue}");
        let headers = memory.headers_of(queue);
        assert_eq!(
            headers[0].get("traceparent").map(String::as_str),
            Some(TRACEPARENT),
            "{queue}: the W3C header is passed on"
        );
    }
}

#[tokio::test]
async fn publishing_through_the_app_continues_the_trace() {
    let memory = MemoryTransport::new();
    let incoming = continue_from(&memory, |ctx| async move {
        let app = ctx
            .app()
            .expect("the runtime's context has its app")
            .clone();
        app.publish_to("out", "urn:babel:mail:confirm", &json!({}))
            .await?;
        let built = app.envelope("urn:babel:mail:sent").build()?;
        app.publish_envelope("built", &built, &Headers::new())
            .await?;
        app.publish_batch("batch", &[app.envelope("urn:babel:mail:sent").build()?])
            .await?;
        Ok(())
    })
    .await;
    for queue in ["out", "built", "batch"] {
        let bodies = memory.bodies(queue);
        assert_eq!(bodies.len(), 1, "{queue}");
        assert_eq!(trace_id_of(&bodies[0]), incoming, "{queue}");
    }
    for queue in ["out", "built"] {
        assert_eq!(
            memory.headers_of(queue)[0]
                .get("traceparent")
                .map(String::as_str),
            Some(TRACEPARENT),
            "{queue}"
        );
    }
}

#[tokio::test]
async fn an_explicit_trace_id_wins() {
    let memory = MemoryTransport::new();
    let incoming = continue_from(&memory, |ctx| async move {
        let app = ctx.app().expect("an app").clone();
        let own = app
            .envelope("urn:babel:mail:sent")
            .trace_id("mine")
            .build()?;
        app.publish_envelope("app", &own, &Headers::new()).await?;
        let mut headers = Headers::new();
        headers.insert(
            "traceparent".into(),
            "00-11111111111111111111111111111111-2222222222222222-01".into(),
        );
        let same_trace = app.envelope("urn:babel:mail:sent").build()?;
        app.publish_envelope("own-header", &same_trace, &headers)
            .await?;
        ctx.publish_message(&Shipped {
            trace: Some("message-own".into()),
            order_id: 7,
        })
        .await?;
        Ok(())
    })
    .await;
    assert_eq!(trace_id_of(&memory.bodies("app")[0]), "mine");
    assert!(
        !memory.headers_of("app")[0].contains_key("traceparent"),
        "another trace: the incoming traceparent is not passed on"
    );
    assert_eq!(trace_id_of(&memory.bodies("own-header")[0]), incoming);
    assert_eq!(
        memory.headers_of("own-header")[0]
            .get("traceparent")
            .map(String::as_str),
        Some("00-11111111111111111111111111111111-2222222222222222-01"),
        "the caller's header wins"
    );
    let shipped = memory.bodies("orders");
    assert_eq!(trace_id_of(&shipped[0]), "message-own");
    assert!(!memory.headers_of("orders")[0].contains_key("traceparent"));
}

#[tokio::test]
async fn outside_a_handler_a_publish_gets_a_fresh_trace() {
    let memory = MemoryTransport::new();
    let incoming = continue_from(&memory, |_ctx| async { Ok(()) }).await;
    assert!(Context::current().is_none());
    let app = app(&memory).build().unwrap();
    app.publish_to("out", URN, &json!({})).await.unwrap();
    let fresh = trace_id_of(&memory.bodies("out")[0]);
    assert_ne!(fresh, incoming);
    assert!(memory.headers_of("out")[0].is_empty());
    // A context built by hand has no app to publish with.
    let ctx = Context::new(Envelope::builder(URN).build().unwrap(), "q", Headers::new());
    assert!(ctx.publish(URN, &json!({})).await.is_err());
}

#[tokio::test]
async fn a_spawned_task_continues_the_trace_when_scoped() {
    let memory = MemoryTransport::new();
    let incoming = continue_from(&memory, |ctx| async move {
        let app = ctx.app().expect("an app").clone();
        let unscoped = app.clone();
        tokio::spawn(async move { unscoped.publish_to("unscoped", URN, &json!({})).await })
            .await
            .expect("joined")?;
        let scoped = ctx.clone().scope(async move {
            assert!(Context::current().is_some());
            app.publish_to("scoped", URN, &json!({})).await
        });
        tokio::spawn(scoped).await.expect("joined")?;
        Ok(())
    })
    .await;
    assert_ne!(trace_id_of(&memory.bodies("unscoped")[0]), incoming);
    assert_eq!(trace_id_of(&memory.bodies("scoped")[0]), incoming);
}

#[tokio::test]
async fn a_wrapper_can_pass_its_own_trace_headers_on() {
    let memory = MemoryTransport::new();
    const OWN: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";
    continue_from(&memory, |ctx| async move {
        let mut headers = Headers::new();
        headers.insert("Traceparent".into(), OWN.into());
        headers.insert("x-other".into(), "dropped".into());
        let wrapped = ctx.with_trace_headers(headers);
        assert_eq!(
            ctx.headers().get("traceparent").map(String::as_str),
            Some(TRACEPARENT),
            "what arrived is unchanged"
        );
        let inner = wrapped.clone();
        wrapped
            .scope(async move {
                inner.publish_to("ctx", URN, &json!({})).await?;
                let app = inner.app().expect("an app").clone();
                app.publish_to("app", URN, &json!({})).await?;
                Ok::<(), babelqueue_core::Error>(())
            })
            .await
    })
    .await;
    for queue in ["ctx", "app"] {
        let headers = &memory.headers_of(queue)[0];
        assert_eq!(headers.get("traceparent").map(String::as_str), Some(OWN));
        assert!(!headers.contains_key("x-other"));
    }
}

struct OwnTraceparent;

const HOOKED: &str = "00-0af7651916cd43dd8448eb211c80319c-1111111111111111-01";

impl SpanHook for OwnTraceparent {
    fn on_span(&self, _span: &tracing::Span, _ctx: &Context) {}
    fn trace_headers(&self, _span: &tracing::Span, _ctx: &Context) -> Option<Headers> {
        Some(Headers::from([(
            "traceparent".to_owned(),
            HOOKED.to_owned(),
        )]))
    }
}

#[tokio::test]
async fn a_hook_can_pass_the_spans_own_traceparent_on() {
    let Captured { .. } = &capture().await;
    let memory = MemoryTransport::new();
    let app = app(&memory)
        .span_hook(OwnTraceparent)
        .handle(URN, |ctx: Context| async move {
            assert_eq!(
                ctx.headers().get("traceparent").map(String::as_str),
                Some(TRACEPARENT),
                "what arrived is unchanged"
            );
            ctx.publish_to("out", "urn:babel:mail:confirm", &json!({}))
                .await
                .map_err(|e| fail(&e))?;
            let app = ctx.app().expect("an app").clone();
            app.publish_to("out", "urn:babel:mail:confirm", &json!({}))
                .await
                .map_err(|e| fail(&e))?;
            Ok(())
        })
        .build()
        .unwrap();
    let incoming = app.envelope(URN).build().unwrap();
    let headers = Headers::from([("traceparent".to_owned(), TRACEPARENT.to_owned())]);
    app.publish_envelope("orders", &incoming, &headers)
        .await
        .unwrap();
    app.consume(drain()).await.unwrap();
    let out = memory.headers_of("out");
    assert_eq!(out.len(), 2);
    for headers in out {
        assert_eq!(headers.get("traceparent").map(String::as_str), Some(HOOKED));
    }
}
