//! The runtime: [`App`] publishes envelopes and runs the consume loop that routes each delivery
//! to its handler and settles it.
//!
//! The module tree reads like the path of one message (`docs/architecture.md`):
//!
//! * `builder`: configuring an app;
//! * `publish`: the producer side;
//! * `consume`: the loop, its concurrency and the graceful shutdown;
//! * `dispatch`: one delivery: classify it, run its handler, pick the plan;
//! * `settle`: carry the plan out with the transport's capabilities;
//! * [`trace`]: the span around every handler call, and trace continuation for what a handler
//!   publishes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::handler::Handler;
use crate::policy::Policy;
use crate::transport::Transport;

mod builder;
mod consume;
mod dispatch;
mod publish;
mod settle;
pub mod trace;

pub use builder::AppBuilder;
pub use consume::{Consume, StopHandle, Summary};
pub use trace::SpanHook;

const LOG: &str = "babelqueue::app";

/// How one delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// Handled and acknowledged (or deleted by the `delete` strategy).
    Acked,
    /// Acknowledged and dropped, with a warning.
    Dropped,
    /// Given back for a retry (attempts counted).
    Retried,
    /// Given back unchanged (the `release` strategy).
    Released,
    /// Written to the dead-letter queue and settled.
    DeadLettered,
    /// Left to the broker's native mechanism.
    Native,
    /// Left unsettled after a failed settle write; it will come back.
    Unsettled,
    /// Released unchanged at the shutdown deadline (its handler was interrupted).
    Interrupted,
}

impl Outcome {
    /// The outcome's name in snake case (`acked`, `dead_lettered` …), as tools print it and
    /// metrics label it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Acked => "acked",
            Outcome::Dropped => "dropped",
            Outcome::Retried => "retried",
            Outcome::Released => "released",
            Outcome::DeadLettered => "dead_lettered",
            Outcome::Native => "native",
            Outcome::Unsettled => "unsettled",
            Outcome::Interrupted => "interrupted",
        }
    }
}

/// What the runtime reports about each delivery, for metrics, tracing and tools that show the
/// wire.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Event<'a> {
    /// The consumed queue.
    pub queue: &'a str,
    /// The URN the delivery was routed by (`""` for poison and gated deliveries).
    pub urn: &'a str,
    /// How it ended.
    pub outcome: Outcome,
    /// The handler's run time and whether it succeeded, when a handler ran.
    pub handler: Option<(Duration, bool)>,
    /// The delivery itself, as the transport handed it out: its exact body bytes, its
    /// headers and facts (and, through the transport's [`Inspector`](crate::Inspector), what
    /// the broker knows of it).
    pub delivery: &'a crate::Delivery,
}

/// Receives an [`Event`] for every settled delivery (implemented by `babelqueue-otel` and
/// `babelqueue-prometheus`).
pub trait Observer: Send + Sync {
    /// Called once per delivery, after it is settled.
    fn on_event(&self, event: &Event<'_>);

    /// Called when the runtime starts on a delivery of `queue` (before it reads the body);
    /// every call is followed by one [`on_event`](Observer::on_event) for the same delivery, so
    /// the two bracket a delivery in flight. The default does nothing.
    fn on_dispatch(&self, queue: &str) {
        let _ = queue;
    }

    /// Called after the app published `count` messages of `urn` to `queue` (its own publish
    /// calls and its handlers', not the runtime's retry and dead-letter copies). The default
    /// does nothing.
    fn on_published(&self, queue: &str, urn: &str, count: u64) {
        let _ = (queue, urn, count);
    }
}

/// Several observers as one, called in order.
struct Observers(Vec<Arc<dyn Observer>>);

impl Observer for Observers {
    fn on_event(&self, event: &Event<'_>) {
        for observer in &self.0 {
            observer.on_event(event);
        }
    }

    fn on_dispatch(&self, queue: &str) {
        for observer in &self.0 {
            observer.on_dispatch(queue);
        }
    }

    fn on_published(&self, queue: &str, urn: &str, count: u64) {
        for observer in &self.0 {
            observer.on_published(queue, urn, count);
        }
    }
}

/// The handlers by URN. The keys are the application's own; a delivery's URN only looks one up,
/// so a seeded fast hasher is enough.
type Handlers = std::collections::HashMap<String, Arc<dyn Handler>, foldhash::fast::RandomState>;

/// Everything an app holds, shared by its clones and its dispatch tasks.
struct Inner {
    transport: Arc<dyn Transport>,
    queue: String,
    policy: Policy,
    handlers: Handlers,
    fallback: Option<Arc<dyn Handler>>,
    concurrency: usize,
    /// Deliveries held at once, running or waiting for a slot (at least `concurrency`).
    prefetch: usize,
    /// Whether `prefetch` came from the transport's per-slot default (above `concurrency`),
    /// not from the app: the loop then asks for deliveries beyond its free handler slots only
    /// while handlers finish at once, so that no held delivery waits behind a slow handler
    /// while its broker lock runs.
    prefetch_follows_handlers: bool,
    shutdown_timeout: Duration,
    poll_timeout: Duration,
    rewind_pause: Duration,
    stop: Arc<consume::Stop>,
    observer: Option<Arc<dyn Observer>>,
    span_hook: Option<Arc<dyn SpanHook>>,
}

/// The BabelQueue runtime: publish envelopes, and consume them with URN-routed handlers.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), babelqueue_core::Error> {
/// use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport};
///
/// let app = App::builder(MemoryTransport::new())
///     .queue("orders")
///     .dead_letter(true)
///     .handle("urn:babel:orders:created", |ctx: Context| async move {
///         let order: serde_json::Value = ctx.data_as()?;
///         println!("order {}", order["order_id"]);
///         Ok::<(), HandlerError>(())
///     })
///     .build()?;
///
/// app.publish("urn:babel:orders:created", &serde_json::json!({"order_id": 1042})).await?;
/// let summary = app.consume(Consume::new().max_messages(1).handle_signals(false)).await?;
/// assert_eq!(summary.processed, 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

impl fmt::Debug for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut urns: Vec<&String> = self.inner.handlers.keys().collect();
        urns.sort();
        f.debug_struct("App")
            .field("transport", &self.inner.transport.name())
            .field("queue", &self.inner.queue)
            .field("policy", &self.inner.policy)
            .field("concurrency", &self.inner.concurrency)
            .field("prefetch", &self.inner.prefetch)
            .field("handlers", &urns)
            .finish_non_exhaustive()
    }
}

impl App {
    /// The transport.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.inner.transport
    }

    /// The default queue.
    pub fn queue(&self) -> &str {
        &self.inner.queue
    }

    /// The settle policy.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// A handle that stops a running consume loop.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle::new(self.inner.stop.clone())
    }

    /// Routes one delivery the caller already popped, and settles it.
    pub async fn dispatch(&self, delivery: crate::Delivery) -> Outcome {
        // The dispatch owns a shared app, as a consume run's do: one allocation per call here.
        Arc::new(self.clone())
            .dispatch_owned(delivery, dispatch::Deadline::never(), false)
            .await
            .outcome
    }
}
