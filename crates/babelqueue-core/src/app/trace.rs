//! Tracing around every handler call, and trace continuation for what a handler publishes.
//!
//! * Every handler call runs inside a `tracing` span named [`SPAN_NAME`] (target
//!   [`SPAN_TARGET`], level INFO) with the fields `queue`, `urn`, `message_id`, `trace_id` and
//!   `attempts`, so the handler's own log lines are attributable to one delivery. With no
//!   subscriber interested, the span is disabled and none of the field values are computed.
//! * A [`SpanHook`] (set with [`AppBuilder::span_hook`](crate::AppBuilder::span_hook)) sees each
//!   enabled span before the handler runs in it: `babelqueue-otel` uses one to give the span its
//!   OpenTelemetry parent under `tracing-opentelemetry`.
//! * While the handler's future runs, its [`Context`] is the *current delivery*
//!   ([`Context::current`]): [`App::publish`](crate::App::publish) and the other publish helpers
//!   then continue its `trace_id` and pass its W3C trace headers on, unless the caller set its
//!   own. The current delivery itself lives with the handler types
//!   ([`handler`](crate::handler)), which read it; this module sets it around each call.

use crate::handler::Context;
use crate::transport::Headers;

/// The name of the span around every handler call.
pub const SPAN_NAME: &str = "babelqueue.handle";

/// The target of the span around every handler call (filter on it, e.g.
/// `RUST_LOG=babelqueue::handle=info`).
pub const SPAN_TARGET: &str = "babelqueue::handle";

pub use crate::handler::current::{HEADER_TRACEPARENT, HEADER_TRACESTATE};
pub(crate) use crate::handler::current::{inherit, inherited_headers, scope};

/// Sees each enabled delivery span before the handler runs in it.
///
/// Called only when a subscriber is interested in the span (never for a disabled one), before
/// the span is first entered, so the hook may still record its empty fields (`otel.name`,
/// `otel.kind`) or give it a parent.
///
/// ```
/// use babelqueue_core::{App, Context, MemoryTransport, SpanHook};
///
/// struct Tag;
/// impl SpanHook for Tag {
///     fn on_span(&self, span: &tracing::Span, ctx: &Context) {
///         span.record("otel.name", format!("process {}", ctx.urn()));
///     }
/// }
///
/// let app = App::builder(MemoryTransport::new()).span_hook(Tag).build().unwrap();
/// # drop(app);
/// ```
pub trait SpanHook: Send + Sync + 'static {
    /// Called with the delivery's span and the context its handler will see.
    fn on_span(&self, span: &tracing::Span, ctx: &Context);

    /// Called after [`SpanHook::on_span`]: the W3C trace headers (`traceparent`, `tracestate`)
    /// that what the handler publishes carries instead of the incoming ones, such as the
    /// span's own `traceparent` (see [`Context::with_trace_headers`]). `None`, the default,
    /// passes the incoming ones on.
    fn trace_headers(&self, span: &tracing::Span, ctx: &Context) -> Option<Headers> {
        let _ = (span, ctx);
        None
    }
}

/// The span around one handler call: disabled (and free) when no subscriber wants it. Returns
/// it with the context the handler sees (the hook may have set its trace headers).
pub(super) fn delivery_span(ctx: Context, hook: Option<&dyn SpanHook>) -> (tracing::Span, Context) {
    // The field values are evaluated only when the span is enabled.
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        SPAN_NAME,
        queue = ctx.queue(),
        urn = %ctx.urn(),
        message_id = ctx.message_id().as_deref(),
        trace_id = ctx.trace_id().as_deref(),
        attempts = ctx.attempts(),
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
    );
    let ctx = match hook {
        Some(hook) if !span.is_disabled() => {
            hook.on_span(&span, &ctx);
            match hook.trace_headers(&span, &ctx) {
                Some(headers) => ctx.with_trace_headers(headers),
                None => ctx,
            }
        }
        _ => ctx,
    };
    (span, ctx)
}
