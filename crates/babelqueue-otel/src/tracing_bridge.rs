//! The `tracing` path (feature `tracing`): for applications that export their `tracing` spans
//! with `tracing-opentelemetry`, [`TracingParent`] puts the runtime's delivery span
//! (`babelqueue.handle`, see [`babelqueue_core::app::trace`]) into the message's trace.
//!
//! This is the alternative to [`Otel::handler`](crate::Otel::handler): use one or the other for
//! a handler, not both (each would start a CONSUMER span of its own).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::Error> {
//! use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, MemoryTransport};
//! use babelqueue_otel::{TracingParent, trace_id_of};
//! use opentelemetry::trace::{SpanKind, TracerProvider as _};
//! use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
//! use tracing_subscriber::layer::SubscriberExt as _;
//!
//! // The application's tracing setup: spans go to OpenTelemetry through tracing-opentelemetry.
//! let spans = InMemorySpanExporter::default();
//! let provider = SdkTracerProvider::builder().with_simple_exporter(spans.clone()).build();
//! let subscriber = tracing_subscriber::registry()
//!     .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("orders")));
//! let _guard = tracing::subscriber::set_default(subscriber);
//!
//! let app = App::builder(MemoryTransport::new())
//!     .queue("orders")
//!     .span_hook(TracingParent::new())
//!     .handle("urn:babel:orders:created", |_ctx: Context| async {
//!         tracing::info!("charging the card"); // an event of the CONSUMER span
//!         Ok::<(), HandlerError>(())
//!     })
//!     .build()?;
//! let trace_id = "4bf92f35-77b3-4da6-a3ce-929d0e0e4736";
//! let order = app.envelope("urn:babel:orders:created").trace_id(trace_id).build()?;
//! app.publish_envelope("orders", &order, &Default::default()).await?;
//! app.consume(Consume::new().max_messages(1).handle_signals(false)).await?;
//!
//! let finished = spans.get_finished_spans().unwrap();
//! let consumer = finished.iter().find(|s| s.span_kind == SpanKind::Consumer).unwrap();
//! assert_eq!(consumer.name, "process urn:babel:orders:created");
//! assert_eq!(consumer.span_context.trace_id(), trace_id_of(trace_id));
//! # Ok(()) }
//! ```

use babelqueue_core::{Context, Headers, SpanHook};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry::{Key, Value};
use opentelemetry_semantic_conventions::attribute as semconv;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::spans::{
    ATTR_ATTEMPTS, ATTR_LEGACY_OPERATION, ATTR_PARENT_SOURCE, ATTR_URN, MESSAGING_SYSTEM,
};
use crate::traceparent::{extract_from, inject};

/// A [`SpanHook`] for [`AppBuilder::span_hook`](babelqueue_core::AppBuilder::span_hook): under
/// `tracing-opentelemetry`, each delivery span becomes a CONSUMER span `process <urn>` in the
/// message's trace.
///
/// Per delivery, before the handler runs:
///
/// * the parent is chosen as [`Otel::handler`](crate::Otel::handler) chooses it
///   ([`extract_from`]): the `traceparent` header (the producer's span), else the synthetic
///   parent of the envelope's `trace_id`, else whatever the span's `tracing` parent gives;
/// * the span is named `process <urn>`, of kind CONSUMER, with the same messaging attributes as
///   [`Otel::handler`](crate::Otel::handler)'s span (its `tracing` fields become attributes
///   too);
/// * what the handler publishes carries this span's `traceparent` (its trace continues from
///   here, see [`SpanHook::trace_headers`]).
///
/// Without a `tracing-opentelemetry` layer in the subscriber the hook only names the span; with
/// no subscriber interested the runtime never calls it.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingParent {
    _private: (),
}

impl TracingParent {
    /// The hook.
    pub fn new() -> TracingParent {
        TracingParent::default()
    }
}

impl SpanHook for TracingParent {
    fn on_span(&self, span: &tracing::Span, ctx: &Context) {
        let urn = ctx.urn();
        span.record("otel.name", format!("process {urn}"));
        span.record("otel.kind", "consumer");
        let attribute = |key: &'static str, value: Value| span.set_attribute(Key::new(key), value);
        attribute(semconv::MESSAGING_SYSTEM, MESSAGING_SYSTEM.into());
        attribute(semconv::MESSAGING_OPERATION_TYPE, "process".into());
        attribute(semconv::MESSAGING_OPERATION_NAME, "process".into());
        attribute(ATTR_LEGACY_OPERATION, "process".into());
        attribute(
            semconv::MESSAGING_DESTINATION_NAME,
            ctx.queue().to_owned().into(),
        );
        attribute(ATTR_URN, urn.into_owned().into());
        attribute(ATTR_ATTEMPTS, ctx.attempts().into());
        if let Some(id) = ctx.message_id() {
            attribute(semconv::MESSAGING_MESSAGE_ID, id.into_owned().into());
        }
        if let Some(t) = ctx.trace_id() {
            attribute(
                semconv::MESSAGING_MESSAGE_CONVERSATION_ID,
                t.into_owned().into(),
            );
        }
        if let Some(extracted) = extract_from(ctx) {
            attribute(ATTR_PARENT_SOURCE, extracted.source.as_str().into());
            let parent =
                opentelemetry::Context::current().with_remote_span_context(extracted.span_context);
            // Fails only without a tracing-opentelemetry layer, where there is nothing to parent.
            let _ = span.set_parent(parent);
        }
    }

    fn trace_headers(&self, span: &tracing::Span, _ctx: &Context) -> Option<Headers> {
        let cx = span.context();
        let mut headers = Headers::new();
        inject(cx.span().span_context(), &mut headers);
        (!headers.is_empty()).then_some(headers)
    }
}
