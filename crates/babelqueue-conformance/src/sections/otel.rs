//! `traceparent` (scope `otel`): consumer-side W3C extraction with the `trace_id` fallback,
//! through the real runtime and the real `babelqueue-otel` consumer wrapper.
//!
//! Each case publishes an envelope carrying the case's `trace_id` on the in-memory transport,
//! with the case's `traceparent` as an out-of-band header (none when it is `null`), and consumes
//! it with a handler wrapped by [`Otel::handler`]. The wrapper's tracer is OpenTelemetry's no-op
//! tracer, whose span is exactly the parent it was started from, so what the handler observes as
//! the current span context is the parent the wrapper chose.

use std::sync::{Arc, Mutex};

use babelqueue_core::{
    App, Consume, Context, Envelope, HandlerError, Headers, MemoryTransport, Transport,
};
use babelqueue_otel::{HEADER_TRACEPARENT, Otel, extract_from};
use opentelemetry::trace::noop::NoopTracer;
use opentelemetry::trace::{SpanContext, TraceContextExt};
use serde_json::Value;

use super::{Ctx, str_field};
use crate::Case;
use crate::hop::block_on;

const QUEUE: &str = "conformance-otel";
const URN: &str = "urn:babel:conformance:traceparent";

/// What the wrapped handler saw.
struct Seen {
    parent: SpanContext,
    source: Option<&'static str>,
    trace_id: Option<String>,
    headers: Headers,
}

pub(super) fn traceparent(_ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let mode = str_field(c, "mode")?;
    if mode != "extract" {
        return Err(format!("unknown mode {mode:?}"));
    }
    let trace_id = str_field(c, "trace_id")?;
    let mut headers = Headers::new();
    match c.get("traceparent") {
        Some(Value::String(value)) => {
            headers.insert(HEADER_TRACEPARENT.to_owned(), value.clone());
        }
        Some(Value::Null) | None => {}
        Some(other) => {
            return Err(format!(
                "`traceparent` is neither a string nor null: {other}"
            ));
        }
    }
    let Some(Value::Object(expect)) = c.get("expect") else {
        return Err("case has no `expect` object".into());
    };

    let seen = consume_once(trace_id, &headers)?;

    if seen.headers != headers {
        return Err(format!(
            "the handler saw headers {:?}, the broker carried {headers:?}",
            seen.headers
        ));
    }
    if seen.trace_id.as_deref() != Some(trace_id) {
        return Err(format!(
            "the envelope trace_id changed to {:?}; it must stay {trace_id:?}",
            seen.trace_id
        ));
    }
    let observed = |field: &str| -> Result<String, String> {
        Ok(match field {
            "source" => seen.source.unwrap_or("none").to_owned(),
            "trace_id_hex" => format!("{:032x}", seen.parent.trace_id()),
            "parent_span_id" => format!("{:016x}", seen.parent.span_id()),
            "flags" => format!("{:02x}", seen.parent.trace_flags().to_u8()),
            other => return Err(format!("unknown expect field `{other}`")),
        })
    };
    for (field, want) in expect {
        let want = want
            .as_str()
            .ok_or_else(|| format!("expect.{field} is not a string"))?;
        let got = observed(field)?;
        if got != want {
            return Err(format!("{field} is {got:?}, expected {want:?}"));
        }
    }
    if !seen.parent.is_valid() || !seen.parent.is_remote() {
        return Err(format!(
            "the consumer span's parent is not a valid remote context: {:?}",
            seen.parent
        ));
    }
    Ok(())
}

/// Publishes one envelope with `headers` and consumes it through the traced handler.
fn consume_once(trace_id: &str, headers: &Headers) -> Result<Seen, String> {
    block_on(async {
        let seen: Arc<Mutex<Option<Seen>>> = Arc::default();
        let record = seen.clone();
        let otel = Otel::new(NoopTracer::new());
        let memory = MemoryTransport::new();
        let app = App::builder(memory.clone())
            .queue(QUEUE)
            .max_attempts(1)
            .handle(
                URN,
                otel.handler(move |ctx: Context| {
                    let record = record.clone();
                    async move {
                        let parent = opentelemetry::Context::current()
                            .span()
                            .span_context()
                            .clone();
                        *record.lock().unwrap_or_else(|p| p.into_inner()) = Some(Seen {
                            parent,
                            source: extract_from(&ctx).map(|e| e.source.as_str()),
                            trace_id: ctx.trace_id().map(|t| t.into_owned()),
                            headers: ctx.headers().clone(),
                        });
                        Ok::<(), HandlerError>(())
                    }
                }),
            )
            .build()
            .map_err(|e| e.to_string())?;
        let envelope = Envelope::builder(URN)
            .queue(QUEUE)
            .trace_id(trace_id)
            .build()
            .map_err(|e| e.to_string())?;
        let body = envelope.encode().map_err(|e| e.to_string())?;
        memory
            .send(&babelqueue_core::Outgoing::new(QUEUE, body.as_bytes()).headers(headers))
            .await
            .map_err(|e| e.to_string())?;
        app.consume(Consume::new().max_messages(1).handle_signals(false))
            .await
            .map_err(|e| e.to_string())?;
        let seen = seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or("the traced handler never ran")?;
        Ok(seen)
    })
}
