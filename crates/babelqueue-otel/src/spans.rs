//! PRODUCER and CONSUMER spans: [`Otel`] publishes inside a producer span and injects its
//! `traceparent`; [`Traced`] runs a handler inside a consumer span whose parent is the
//! producer's span (header) or the `trace_id`'s synthetic parent (no header).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use babelqueue_core::{App, Context, Handler, HandlerFuture, Headers, Message, merge_headers};
use babelqueue_envelope::{Builder, Envelope};
use opentelemetry::context::FutureExt;
use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry::{InstrumentationScope, KeyValue, global};
use opentelemetry_semantic_conventions::attribute as semconv;

use crate::mapping::{synthetic_parent, uuid_of};
use crate::traceparent::{extract_from, inject};

/// `messaging.system` on every span and metric.
pub const MESSAGING_SYSTEM: &str = "babelqueue";
/// The URN a span or metric is about (BabelQueue's own attribute).
pub const ATTR_URN: &str = "messaging.babelqueue.urn";
/// The body's `attempts` on a consumer span (as the other SDKs name it).
pub const ATTR_ATTEMPTS: &str = "messaging.babelqueue.attempts";
/// Where a consumer span's parent came from: `traceparent` or `trace_id`.
pub const ATTR_PARENT_SOURCE: &str = "messaging.babelqueue.parent_source";
/// The operation attribute the other BabelQueue SDKs emit (`publish` / `process`); kept beside
/// the current `messaging.operation.type` / `.name` so dashboards built on them keep working.
pub const ATTR_LEGACY_OPERATION: &str = "messaging.operation";

/// The instrumentation scope of the global tracer and meter.
pub(crate) fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("babelqueue-otel")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

/// Tracing for one application: publishes in PRODUCER spans, wraps handlers in CONSUMER spans.
///
/// `T` is any OpenTelemetry [`Tracer`]: the global one ([`Otel::global`]) or one from your own
/// provider ([`Otel::new`]). Cloning is cheap (the tracer is shared).
pub struct Otel<T = BoxedTracer> {
    tracer: Arc<T>,
}

impl<T> Clone for Otel<T> {
    fn clone(&self) -> Self {
        Otel {
            tracer: self.tracer.clone(),
        }
    }
}

impl<T> fmt::Debug for Otel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Otel").finish_non_exhaustive()
    }
}

impl Otel<BoxedTracer> {
    /// Uses the globally installed tracer provider (`opentelemetry::global`), scope
    /// `babelqueue-otel`. Without one installed, spans are no-ops and publishing behaves like
    /// a plain publish.
    pub fn global() -> Otel<BoxedTracer> {
        Otel::new(global::tracer_provider().tracer_with_scope(scope()))
    }
}

impl<T> Otel<T>
where
    T: Tracer + Send + Sync + 'static,
    T::Span: Send + Sync + 'static,
{
    /// Traces with `tracer`.
    pub fn new(tracer: T) -> Otel<T> {
        Otel {
            tracer: Arc::new(tracer),
        }
    }

    /// The tracer.
    pub fn tracer(&self) -> &T {
        &self.tracer
    }

    /// Wraps `handler` in a CONSUMER span per delivery (see [`Traced`]).
    pub fn handler<H: Handler>(&self, handler: H) -> Traced<T, H> {
        Traced {
            tracer: self.tracer.clone(),
            inner: Arc::new(handler),
        }
    }

    /// [`App::publish`] inside a PRODUCER span `publish <urn>`: the envelope's `trace_id`
    /// becomes the span's trace (as a UUID) and a `traceparent` header rides beside the body
    /// where the transport carries headers. Returns `meta.id`.
    pub async fn publish<D: serde::Serialize + ?Sized>(
        &self,
        app: &App,
        urn: &str,
        data: &D,
    ) -> babelqueue_core::Result<String> {
        let queue = app.queue().to_owned();
        self.publish_to(app, &queue, urn, data).await
    }

    /// [`App::publish_to`] inside a PRODUCER span (see [`Otel::publish`]).
    pub async fn publish_to<D: serde::Serialize + ?Sized>(
        &self,
        app: &App,
        queue: &str,
        urn: &str,
        data: &D,
    ) -> babelqueue_core::Result<String> {
        let builder = Envelope::builder(urn).queue(queue).data(data);
        self.publish_built(app, queue, urn, builder, &Headers::new())
            .await
    }

    /// [`App::publish_message`] inside a PRODUCER span (see [`Otel::publish`]).
    pub async fn publish_message<M: Message + ?Sized>(
        &self,
        app: &App,
        message: &M,
    ) -> babelqueue_core::Result<String> {
        let queue = app.queue().to_owned();
        let builder = Builder::from_message(message).queue(queue.clone());
        self.publish_built(app, &queue, M::URN, builder, &Headers::new())
            .await
    }

    /// Builds the envelope from `builder` (its `trace_id` set to the span's trace) and
    /// publishes it to `queue` inside a PRODUCER span `publish <urn>`, with `headers` beside
    /// it. `headers` win over the injected `traceparent`/`tracestate` on a collision. Returns
    /// `meta.id`.
    pub async fn publish_builder(
        &self,
        app: &App,
        queue: &str,
        builder: Builder,
        urn: &str,
        headers: &Headers,
    ) -> babelqueue_core::Result<String> {
        self.publish_built(app, queue, urn, builder, headers).await
    }

    /// Publishes an already built envelope inside a PRODUCER span, never changing it. The span's
    /// parent is the ambient span when there is one, else the synthetic parent of the
    /// envelope's `trace_id`, so the span shares the trace a header-blind consumer will derive.
    /// `headers` win over the injected ones on a collision.
    pub async fn publish_envelope(
        &self,
        app: &App,
        queue: &str,
        envelope: &Envelope,
        headers: &Headers,
    ) -> babelqueue_core::Result<()> {
        let ambient = opentelemetry::Context::current();
        let parent = match envelope.trace_id() {
            Some(t) if !t.is_empty() && !ambient.span().span_context().is_valid() => {
                ambient.with_remote_span_context(synthetic_parent(&t))
            }
            _ => ambient,
        };
        let urn = envelope.urn();
        let cx = self.start_producer(&parent, queue, &urn);
        self.send(&cx, app, queue, envelope, headers).await
    }

    async fn publish_built(
        &self,
        app: &App,
        queue: &str,
        urn: &str,
        builder: Builder,
        headers: &Headers,
    ) -> babelqueue_core::Result<String> {
        let cx = self.start_producer(&opentelemetry::Context::current(), queue, urn);
        let span_context = cx.span().span_context().clone();
        // A no-op tracer yields no valid trace: the builder then mints its own trace_id.
        let builder = if span_context.is_valid() {
            builder.trace_id(uuid_of(span_context.trace_id()))
        } else {
            builder
        };
        let envelope = match builder.build() {
            Ok(envelope) => envelope,
            Err(e) => {
                let e = babelqueue_core::Error::from(e);
                fail(&cx, &format!("{:?}", e.kind()), &e.to_string());
                cx.span().end();
                return Err(e);
            }
        };
        self.send(&cx, app, queue, &envelope, headers).await?;
        Ok(envelope
            .message_id()
            .map(Cow::into_owned)
            .unwrap_or_default())
    }

    fn start_producer(
        &self,
        parent: &opentelemetry::Context,
        queue: &str,
        urn: &str,
    ) -> opentelemetry::Context {
        let span = self
            .tracer
            .span_builder(format!("publish {urn}"))
            .with_kind(SpanKind::Producer)
            .with_attributes([
                KeyValue::new(semconv::MESSAGING_SYSTEM, MESSAGING_SYSTEM),
                KeyValue::new(semconv::MESSAGING_OPERATION_TYPE, "send"),
                KeyValue::new(semconv::MESSAGING_OPERATION_NAME, "publish"),
                KeyValue::new(ATTR_LEGACY_OPERATION, "publish"),
                KeyValue::new(semconv::MESSAGING_DESTINATION_NAME, queue.to_owned()),
                KeyValue::new(ATTR_URN, urn.to_owned()),
            ])
            .start_with_context(&*self.tracer, parent);
        parent.with_span(span)
    }

    /// Injects the span's context, publishes, records the outcome and ends the span.
    async fn send(
        &self,
        cx: &opentelemetry::Context,
        app: &App,
        queue: &str,
        envelope: &Envelope,
        headers: &Headers,
    ) -> babelqueue_core::Result<()> {
        let span = cx.span();
        if let Some(id) = envelope.message_id() {
            span.set_attribute(KeyValue::new(
                semconv::MESSAGING_MESSAGE_ID,
                id.into_owned(),
            ));
        }
        if let Some(t) = envelope.trace_id() {
            span.set_attribute(KeyValue::new(
                semconv::MESSAGING_MESSAGE_CONVERSATION_ID,
                t.into_owned(),
            ));
        }
        let mut injected = Headers::new();
        inject(span.span_context(), &mut injected);
        let outgoing = merge_headers([&injected, headers]);
        let result = app
            .publish_envelope(queue, envelope, &outgoing)
            .with_context(cx.clone())
            .await;
        if let Err(e) = &result {
            fail(cx, &format!("{:?}", e.kind()), &e.to_string());
        }
        span.end();
        result
    }
}

/// Marks the context's span failed: status ERROR, `error.type`, and an `exception` event.
fn fail(cx: &opentelemetry::Context, exception: &str, message: &str) {
    let span = cx.span();
    span.set_status(Status::error(message.to_owned()));
    span.set_attribute(KeyValue::new(semconv::ERROR_TYPE, exception.to_owned()));
    span.add_event(
        "exception",
        vec![
            KeyValue::new(semconv::EXCEPTION_TYPE, exception.to_owned()),
            KeyValue::new(semconv::EXCEPTION_MESSAGE, message.to_owned()),
        ],
    );
}

/// A handler that runs inside a CONSUMER span `process <urn>`.
///
/// The span's parent is chosen per delivery by [`extract_from`]: the `traceparent` header when
/// the broker carried a valid one (the producer's span: a true parent-child link), else the
/// synthetic parent of the envelope's `trace_id` (the same trace, a shared synthetic parent),
/// else the ambient context. The span is current while the handler runs, so a publish from the
/// handler continues the trace: [`Otel::publish`] as a child of this span, and a plain
/// [`App::publish`] or [`Context::publish`] with this span's `traceparent` beside the
/// delivery's `trace_id` ([`Context::with_trace_headers`]). A failed handler marks the span ERROR (with an `exception`
/// event) and its error goes back to the runtime unchanged, so retry and dead-lettering apply.
pub struct Traced<T, H> {
    tracer: Arc<T>,
    inner: Arc<H>,
}

impl<T, H> fmt::Debug for Traced<T, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Traced")
    }
}

/// Wraps `handler` in a CONSUMER span per delivery, traced by `tracer` (the same as
/// [`Otel::handler`]).
pub fn traced<T, H>(tracer: Arc<T>, handler: H) -> Traced<T, H>
where
    T: Tracer + Send + Sync + 'static,
    T::Span: Send + Sync + 'static,
    H: Handler,
{
    Traced {
        tracer,
        inner: Arc::new(handler),
    }
}

impl<T, H> Traced<T, H>
where
    T: Tracer + Send + Sync + 'static,
    T::Span: Send + Sync + 'static,
    H: Handler,
{
    /// Starts the consumer span of `ctx` and returns the context that holds it (exposed for
    /// benchmarks and custom runners; [`Handler::call`] uses it).
    pub fn start(&self, ctx: &Context) -> opentelemetry::Context {
        let urn = ctx.urn();
        let mut attributes = vec![
            KeyValue::new(semconv::MESSAGING_SYSTEM, MESSAGING_SYSTEM),
            KeyValue::new(semconv::MESSAGING_OPERATION_TYPE, "process"),
            KeyValue::new(semconv::MESSAGING_OPERATION_NAME, "process"),
            KeyValue::new(ATTR_LEGACY_OPERATION, "process"),
            KeyValue::new(semconv::MESSAGING_DESTINATION_NAME, ctx.queue().to_owned()),
            KeyValue::new(ATTR_URN, urn.clone().into_owned()),
            KeyValue::new(ATTR_ATTEMPTS, ctx.attempts()),
        ];
        if let Some(id) = ctx.message_id() {
            attributes.push(KeyValue::new(
                semconv::MESSAGING_MESSAGE_ID,
                id.into_owned(),
            ));
        }
        if let Some(t) = ctx.trace_id() {
            attributes.push(KeyValue::new(
                semconv::MESSAGING_MESSAGE_CONVERSATION_ID,
                t.into_owned(),
            ));
        }
        let ambient = opentelemetry::Context::current();
        let parent = match extract_from(ctx) {
            Some(extracted) => {
                attributes.push(KeyValue::new(ATTR_PARENT_SOURCE, extracted.source.as_str()));
                ambient.with_remote_span_context(extracted.span_context)
            }
            None => ambient,
        };
        let span = self
            .tracer
            .span_builder(format!("process {urn}"))
            .with_kind(SpanKind::Consumer)
            .with_attributes(attributes)
            .start_with_context(&*self.tracer, &parent);
        parent.with_span(span)
    }
}

impl<T, H> Handler for Traced<T, H>
where
    T: Tracer + Send + Sync + 'static,
    T::Span: Send + Sync + 'static,
    H: Handler,
{
    fn call(&self, ctx: Context) -> HandlerFuture {
        let cx = self.start(&ctx);
        let inner = self.inner.clone();
        let mut own = Headers::new();
        let ctx = if inject(cx.span().span_context(), &mut own) {
            ctx.with_trace_headers(own)
        } else {
            ctx
        };
        Box::pin(async move {
            let current = ctx.clone();
            let result = current
                .scope(inner.call(ctx).with_context(cx.clone()))
                .await;
            if let Err(e) = &result {
                fail(&cx, e.exception(), e.message());
            }
            cx.span().end();
            result
        })
    }
}
