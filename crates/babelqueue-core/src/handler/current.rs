//! The *current delivery*: while a handler's future runs, its [`Context`] is reachable from the
//! task ([`Context::current`]), so that what the handler publishes, through the context or
//! through the [`App`](crate::App), continues the delivery's `trace_id` and passes its W3C
//! trace headers on.
//!
//! It lives beside the handler types, not in the runtime: a [`Context`] reads it, and the
//! runtime only sets it ([`scope`]) around each handler call.

use std::future::Future;

use babelqueue_envelope::{Builder, Envelope};

use super::Context;
use crate::transport::Headers;

/// The W3C Trace Context header that names the parent span.
pub const HEADER_TRACEPARENT: &str = "traceparent";

/// The W3C Trace Context header with vendor-specific trace state.
pub const HEADER_TRACESTATE: &str = "tracestate";

tokio::task_local! {
    static CURRENT: Context;
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
