//! With no `tracing` subscriber at all (its own test binary: callsite interest is cached per
//! process), the delivery span is disabled: the handler runs in no span and the span hook is
//! never called.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport, SpanHook};
use serde_json::json;

const URN: &str = "urn:babel:orders:created";

struct Counting(Arc<AtomicUsize>);

impl SpanHook for Counting {
    fn on_span(&self, _span: &tracing::Span, _ctx: &Context) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn without_a_subscriber_the_span_is_disabled_and_the_hook_idle() {
    let hooked = Arc::new(AtomicUsize::new(0));
    let in_a_span = Arc::new(AtomicUsize::new(0));
    let handled = Arc::new(AtomicUsize::new(0));
    let (s, h) = (in_a_span.clone(), handled.clone());
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue("orders")
        .span_hook(Counting(hooked.clone()))
        .handle(URN, move |_ctx: Context| {
            if !tracing::Span::current().is_disabled() {
                s.fetch_add(1, Ordering::SeqCst);
            }
            h.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    for _ in 0..3 {
        app.publish(URN, &json!({})).await.unwrap();
    }
    app.consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .unwrap();
    assert_eq!(handled.load(Ordering::SeqCst), 3);
    assert_eq!(in_a_span.load(Ordering::SeqCst), 0);
    assert_eq!(hooked.load(Ordering::SeqCst), 0);
}
