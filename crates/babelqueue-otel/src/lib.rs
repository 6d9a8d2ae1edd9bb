//! OpenTelemetry for BabelQueue: one trace across every hop.
//!
//! * [`Otel::publish`] publishes inside a PRODUCER span, stamps the span's trace into the
//!   envelope's `trace_id`, and sends a W3C `traceparent` beside the body on every transport
//!   that carries headers;
//! * [`Otel::handler`] runs a handler inside a CONSUMER span whose parent is the producer's span
//!   (from `traceparent`), or, where no header arrived, a synthetic parent in the trace the
//!   `trace_id` maps to ([`trace_id_of`]);
//! * [`Metrics`] counts handled, failed, retried and dead-lettered messages and records handler
//!   run time;
//! * with the `tracing` feature, `TracingParent` (in `tracing_bridge`) is the path for
//!   applications that export `tracing` spans with `tracing-opentelemetry`: the runtime's own
//!   delivery span (`babelqueue.handle`) becomes the CONSUMER span, in the message's trace.
//!
//! What a handler publishes continues the delivery's trace either way (the runtime's trace
//! continuation, see `babelqueue_core::app::trace`): the same `trace_id`, and the consumer
//! span's `traceparent` where the transport carries headers.
//!
//! The envelope is never changed by a header, and headers never enter the envelope.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::Error> {
//! use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport};
//! use babelqueue_otel::Otel;
//! use opentelemetry::trace::{SpanKind, TracerProvider as _};
//! use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
//!
//! // Any tracer works; this one keeps finished spans in memory.
//! let spans = InMemorySpanExporter::default();
//! let provider = SdkTracerProvider::builder().with_simple_exporter(spans.clone()).build();
//! let otel = Otel::new(provider.tracer("orders"));
//!
//! let app = App::builder(MemoryTransport::new())
//!     .queue("orders")
//!     .handle(
//!         "urn:babel:orders:created",
//!         otel.handler(|_ctx: Context| async { Ok::<(), HandlerError>(()) }),
//!     )
//!     .build()?;
//! otel.publish(&app, "urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
//! app.consume(Consume::new().max_messages(1).handle_signals(false)).await?;
//!
//! let finished = spans.get_finished_spans().unwrap();
//! let producer = finished.iter().find(|s| s.span_kind == SpanKind::Producer).unwrap();
//! let consumer = finished.iter().find(|s| s.span_kind == SpanKind::Consumer).unwrap();
//! assert_eq!(consumer.span_context.trace_id(), producer.span_context.trace_id());
//! assert_eq!(consumer.parent_span_id, producer.span_context.span_id());
//! # Ok(()) }
//! ```
//!
//! # The `trace_id` mapping
//!
//! A `trace_id` that is a UUID (32 hex digits once hyphens are removed, not all zero) *is* the
//! 128-bit trace id; any other string is hashed (SHA-256, first 16 bytes). A producer stamps
//! [`uuid_of`] its span's trace, so a header-blind consumer derives the same trace. The
//! details are in [`mapping`].
//!
//! # Where the header rides
//!
//! | transport | `traceparent` carried in | consumer parent |
//! |---|---|---|
//! | memory | the per-message header map | producer span |
//! | Redis, default layout | the `__bq_frame` wrapper (kept across retries) | producer span |
//! | Redis, Laravel layout | nowhere: Laravel reads the stored job | `trace_id` |
//! | RabbitMQ | AMQP message headers (lost on a copy-based retry) | producer span |
//! | SQS | a String message attribute (cap: 10 attributes) | producer span |
//! | Kafka | a record header | producer span |
//! | Artemis | a string AMQP application property (lost on a retry copy) | producer span |
//! | Pulsar, Azure Service Bus | not carried by these transports (as in the reference) | `trace_id` |
//!
//! A transport without headers, a layout that drops them, a retry copy that loses them, and a
//! producer without OpenTelemetry all degrade the same way: the consumer span lands in the
//! `trace_id`'s trace under a synthetic parent, instead of directly under the producer span.
//!
//! # Differences from the reference SDK
//!
//! * `messaging.destination.name` is the queue on both spans (the reference puts the URN there
//!   on the producer span); the URN is in `messaging.babelqueue.urn` and the span name.
//! * Spans carry `messaging.operation.type`/`.name` (current semantic conventions) beside the
//!   older `messaging.operation`, and `messaging.babelqueue.parent_source`.
//! * The `traceparent` parser is this crate's own (strict lower-case W3C), not a propagator
//!   library; it passes the suite's 14 `traceparent` cases.

pub mod mapping;
pub mod metrics;
pub mod spans;
pub mod traceparent;
#[cfg(feature = "tracing")]
pub mod tracing_bridge;

pub use mapping::{synthetic_parent, synthetic_span_id, trace_id_of, uuid_of};
pub use metrics::Metrics;
pub use spans::{Otel, Traced, traced};
pub use traceparent::{
    Extracted, HEADER_TRACEPARENT, HEADER_TRACESTATE, Source, TraceParent, extract, extract_from,
    inject,
};
#[cfg(feature = "tracing")]
pub use tracing_bridge::TracingParent;
