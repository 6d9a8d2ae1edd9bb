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
//!   own.

use std::future::Future;

use babelqueue_envelope::{Builder, Envelope};

use crate::handler::Context;
use crate::transport::Headers;

/// The name of the span around every handler call.
pub const SPAN_NAME: &str = "babelqueue.handle";

/// The target of the span around every handler call (filter on it, e.g.
/// `RUST_LOG=babelqueue::handle=info`).
pub const SPAN_TARGET: &str = "babelqueue::handle";

/// The W3C Trace Context header that names the parent span.
pub const HEADER_TRACEPARENT: &str = "traceparent";

/// The W3C Trace Context header with vendor-specific trace state.
pub const HEADER_TRACESTATE: &str = "tracestate";

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

tokio::task_local! {
    static CURRENT: Context;
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

/// Runs `future` with `ctx` as the current delivery.
pub(crate) fn scope<F: Future>(ctx: Context, future: F) -> impl Future<Output = F::Output> {
    CURRENT.scope(ctx, future)
}

/// The delivery whose handler is running in this task, if any.
pub(crate) fn current() -> Option<Context> {
    CURRENT.try_with(Context::clone).ok()
}

/// `builder` continuing the current delivery's `trace_id` (a later
/// [`Builder::trace_id`] still wins).
pub(crate) fn inherit(builder: Builder) -> Builder {
    match CURRENT.try_with(|ctx| ctx.trace_id().map(|t| t.into_owned())) {
        Ok(Some(trace_id)) => builder.trace_id(trace_id),
        _ => builder,
    }
}

/// The trace headers to send beside `envelope`, given the caller's `headers`: the current
/// delivery's W3C headers when the envelope continues its trace and the caller sent none of its
/// own; nothing otherwise (and nothing is computed outside a handler).
pub(crate) fn inherited_headers(envelope: &Envelope, headers: &Headers) -> Option<Headers> {
    CURRENT
        .try_with(|ctx| {
            if headers.keys().any(|k| is_trace_header(k)) {
                return None;
            }
            let trace_id = envelope.trace_id();
            let continues = trace_id.is_some() && ctx.trace_id() == trace_id;
            continues
                .then(|| ctx.trace_headers())
                .filter(|h| !h.is_empty())
        })
        .ok()
        .flatten()
}

/// Whether `name` is a W3C Trace Context header (ASCII case ignored).
pub(crate) fn is_trace_header(name: &str) -> bool {
    name.eq_ignore_ascii_case(HEADER_TRACEPARENT) || name.eq_ignore_ascii_case(HEADER_TRACESTATE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traced(trace_id: &str) -> Envelope {
        Envelope::builder("urn:y")
            .trace_id(trace_id)
            .build()
            .unwrap()
    }

    fn ctx(trace_id: &str, traceparent: Option<&str>) -> Context {
        let envelope = Envelope::builder("urn:x")
            .trace_id(trace_id)
            .build()
            .unwrap();
        let mut headers = Headers::new();
        if let Some(tp) = traceparent {
            headers.insert("TraceParent".into(), tp.into());
        }
        Context::new(envelope, "q", headers)
    }

    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[tokio::test]
    async fn outside_a_handler_nothing_is_inherited() {
        assert!(current().is_none());
        let built = inherit(Envelope::builder("urn:y")).build().unwrap();
        assert_ne!(built.trace_id().as_deref(), Some("t-1"));
        assert_eq!(inherited_headers(&traced("t-1"), &Headers::new()), None);
    }

    #[tokio::test]
    async fn inside_a_scope_the_trace_and_its_headers_carry_on() {
        scope(ctx("t-1", Some(TP)), async {
            let built = inherit(Envelope::builder("urn:y")).build().unwrap();
            assert_eq!(built.trace_id().as_deref(), Some("t-1"));
            let explicit = inherit(Envelope::builder("urn:y"))
                .trace_id("mine")
                .build()
                .unwrap();
            assert_eq!(explicit.trace_id().as_deref(), Some("mine"));

            let headers = inherited_headers(&traced("t-1"), &Headers::new()).unwrap();
            assert_eq!(
                headers.get(HEADER_TRACEPARENT).map(String::as_str),
                Some(TP)
            );
            // Another trace, or the caller's own trace header: nothing added.
            assert_eq!(inherited_headers(&traced("other"), &Headers::new()), None);
            let mut own = Headers::new();
            own.insert("TRACESTATE".into(), "k=v".into());
            assert_eq!(inherited_headers(&traced("t-1"), &own), None);
        })
        .await;
    }

    #[tokio::test]
    async fn a_delivery_without_trace_headers_adds_none() {
        scope(ctx("t-1", None), async {
            assert_eq!(inherited_headers(&traced("t-1"), &Headers::new()), None);
        })
        .await;
    }
}
