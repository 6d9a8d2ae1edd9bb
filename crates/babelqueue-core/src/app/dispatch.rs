//! One delivery: classify it, route it, run its handler, and pick the settle plan.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::settle::Held;
use super::{App, Event, Inner, LOG, Outcome};
use crate::classify::{Class, classify};
use crate::decide::{self, Failure, QueueFacts};
use crate::handler::{Context, Handler, HandlerError, Publish};
use crate::transport::{Delivery, Redelivery};

/// Fires once the shutdown deadline passes (never, for a direct `dispatch`).
#[derive(Clone)]
pub(super) struct Deadline(Option<watch::Receiver<bool>>);

impl Deadline {
    pub(super) fn never() -> Deadline {
        Deadline(None)
    }

    pub(super) fn at(fired: watch::Receiver<bool>) -> Deadline {
        Deadline(Some(fired))
    }

    /// Fires at the deadline. The wait is boxed when first polled: a handler that finishes at
    /// its first poll (a quick one) never polls it, and the dispatch's own future, allocated
    /// once per message, is the smaller for not holding the wait inline (176 bytes of it in a
    /// debug build).
    async fn reached(&self) {
        Box::pin(self.wait()).await;
    }

    async fn wait(&self) {
        match &self.0 {
            Some(rx) => {
                let mut rx = rx.clone();
                if rx.wait_for(|fired| *fired).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }
}

/// What a dispatch did, and the delivery whose acknowledgement it left to the caller.
pub(super) struct Dispatched {
    pub(super) outcome: Outcome,
    pub(super) ack: Option<Delivery>,
    /// For a delivery given back unchanged ([`Outcome::Released`]): which message it was
    /// ([`message_key`]), so the loop can tell a message it keeps seeing from new work.
    pub(super) released: Option<u64>,
}

impl Dispatched {
    fn settled(outcome: Outcome) -> Dispatched {
        Dispatched {
            outcome,
            ack: None,
            released: None,
        }
    }

    /// `outcome`, keyed by `key()` when it gave the message back unchanged.
    fn keyed(outcome: Outcome, key: impl FnOnce() -> u64) -> Dispatched {
        Dispatched {
            released: (outcome == Outcome::Released).then(key),
            ..Dispatched::settled(outcome)
        }
    }
}

/// Which message a delivery carries, as a number: its `meta.id` when it has one (a broker that
/// counts attempts in the body changes the bytes on every delivery), else its bytes. Stable
/// within a process.
pub(super) fn message_key(message_id: Option<&str>, body: &[u8]) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::hash::DefaultHasher::new();
    match message_id.filter(|id| !id.is_empty()) {
        Some(id) => (0u8, id).hash(&mut hasher),
        None => (1u8, body).hash(&mut hasher),
    }
    hasher.finish()
}

enum HandlerRun {
    Done(Result<(), HandlerError>, Duration),
    Interrupted,
}

impl Inner {
    /// What the decision tables read about the consumed queue and the transport.
    pub(super) fn queue_facts(&self, queue: &str) -> QueueFacts {
        let capabilities = self.transport.capabilities();
        QueueFacts {
            queue: queue.to_owned(),
            dead_letter_queue: decide::dead_letter_queue(
                &self.policy,
                queue,
                capabilities.dead_letter_namer(),
            ),
            native_settler: capabilities.native_settler().is_some(),
            can_redeliver: !matches!(capabilities.redelivery_mode(), Redelivery::Impossible),
        }
    }
}

impl App {
    /// Classifies, routes, handles and settles one delivery. With `gather_ack`, a plain
    /// acknowledgement is not sent but handed back with the outcome, for the consume loop to
    /// send with others ([`BatchAcker`](crate::BatchAcker)); every other settlement is carried
    /// out here. It owns its app, shared (made once per consume run, so a delivery costs a
    /// reference count, not an allocation): the handler's context publishes through it.
    pub(super) async fn dispatch_owned(
        self: Arc<App>,
        delivery: Delivery,
        deadline: Deadline,
        gather_ack: bool,
    ) -> Dispatched {
        let mut sampler = |low: f64, high: f64| low + (high - low) * fastrand::f64();
        let policy = &self.inner.policy;
        let queue = delivery.queue();
        if let Some(observer) = &self.inner.observer {
            observer.on_dispatch(queue);
        }
        let class = classify(delivery.body(), delivery.facts(), queue);
        let mut urn = String::new();
        let mut handler_run = None;
        let mut message_id: Option<String> = None;
        let (plan, held, facts) = match class {
            Class::Gated { declared } => {
                tracing::warn!(target: LOG, queue, declared = %crate::gate::escape(&declared, true),
                    "{}", crate::gate::warning(queue, &declared));
                let facts = self.inner.queue_facts(queue);
                (decide::gated(policy, &facts), Held::raw(&delivery), facts)
            }
            Class::Poison(poison) => {
                tracing::warn!(target: LOG, queue, cause = %poison.cause, attempts = poison.attempts,
                    "A message on {queue:?} is poison ({}); it never reaches a handler", poison.cause);
                let facts = self.inner.queue_facts(queue);
                (
                    decide::poison(policy, &facts, &poison, &mut sampler),
                    Held::raw(&delivery),
                    facts,
                )
            }
            Class::Readable {
                body,
                envelope,
                urn: routed_urn,
                routed,
            } => {
                urn = routed_urn;
                let attempts = envelope.attempts();
                let handler = if urn.is_empty() {
                    None
                } else {
                    self.inner
                        .handlers
                        .get(&urn)
                        .or(self.inner.fallback.as_ref())
                        .cloned()
                };
                let body = match body {
                    Cow::Borrowed(_) => None,
                    Cow::Owned(reconciled) => Some(reconciled),
                };
                let Some(handler) = handler else {
                    let facts = self.inner.queue_facts(queue);
                    let plan = decide::unknown_urn(policy, &facts, &urn, attempts, &mut sampler);
                    let id = envelope.message_id().map(Cow::into_owned);
                    let outcome = self
                        .inner
                        .execute(
                            &delivery,
                            &Held::readable(body, envelope),
                            &facts,
                            plan,
                            &mut sampler,
                        )
                        .await;
                    self.inner.observe(&delivery, &urn, outcome, None);
                    return Dispatched::keyed(outcome, || {
                        message_key(id.as_deref(), delivery.body())
                    });
                };
                let ctx = Context::with_route(
                    envelope,
                    Arc::clone(delivery.queue_shared()),
                    delivery.headers().clone(),
                    if routed { urn.clone() } else { String::new() },
                    delivery.facts().count.map_or(0, |c| c.native()),
                    Some(self.clone() as Arc<dyn Publish>),
                );
                match self
                    .inner
                    .run_handler(handler, ctx.clone(), &deadline)
                    .await
                {
                    HandlerRun::Interrupted => {
                        tracing::warn!(target: LOG, queue, urn = %urn,
                            "Shutdown deadline passed while the handler was running: releasing the message unchanged");
                        // Boxed: a rare path, whose future would otherwise make every dispatch larger.
                        Box::pin(self.inner.release_unprocessed(&delivery)).await;
                        self.inner
                            .observe(&delivery, &urn, Outcome::Interrupted, None);
                        return Dispatched::settled(Outcome::Interrupted);
                    }
                    HandlerRun::Done(Ok(()), took) => {
                        // The common path: nothing to decide, nothing to write.
                        self.inner
                            .observe(&delivery, &urn, Outcome::Acked, Some((took, true)));
                        if gather_ack {
                            return Dispatched {
                                ack: Some(delivery),
                                ..Dispatched::settled(Outcome::Acked)
                            };
                        }
                        self.inner.ack(&delivery).await;
                        return Dispatched::settled(Outcome::Acked);
                    }
                    HandlerRun::Done(Err(e), took) => {
                        handler_run = Some((took, false));
                        tracing::warn!(target: LOG, queue, urn = %urn, attempts,
                            error = %e, "Handler failed");
                        let failure = Failure {
                            message: e.message().to_owned(),
                            exception: e.exception().to_owned(),
                            action: e.action(),
                            unknown_urn: false,
                        };
                        let facts = self.inner.queue_facts(queue);
                        let plan =
                            decide::failure(policy, &facts, attempts, &failure, &mut sampler);
                        message_id = ctx.message_id().map(Cow::into_owned);
                        (plan, Held::readable(body, ctx.envelope().clone()), facts)
                    }
                }
            }
        };
        let outcome = self
            .inner
            .execute(&delivery, &held, &facts, plan, &mut sampler)
            .await;
        self.inner.observe(&delivery, &urn, outcome, handler_run);
        Dispatched::keyed(outcome, || {
            message_key(message_id.as_deref(), delivery.body())
        })
    }
}

impl Inner {
    fn observe(
        &self,
        delivery: &Delivery,
        urn: &str,
        outcome: Outcome,
        handler: Option<(Duration, bool)>,
    ) {
        if let Some(observer) = &self.observer {
            observer.on_event(&Event {
                queue: delivery.queue(),
                urn,
                outcome,
                handler,
                delivery,
            });
        }
    }

    /// Runs the handler in the dispatch's own task (no second spawn): a panic is caught and
    /// becomes a failure rather than a crash, and the shutdown deadline interrupts it by
    /// dropping its future. The handler runs inside its delivery span, with its context as the
    /// current delivery ([`trace`](super::trace)).
    async fn run_handler(
        &self,
        handler: Arc<dyn Handler>,
        ctx: Context,
        deadline: &Deadline,
    ) -> HandlerRun {
        use futures_util::FutureExt as _;
        use tracing::Instrument as _;
        // Timed for the observer only: two clock reads per message are not free.
        let started = self.observer.as_ref().map(|_| Instant::now());
        let (span, ctx) = super::trace::delivery_span(ctx, self.span_hook.as_deref());
        let future = {
            let _entered = span.enter();
            handler.call(ctx.clone())
        };
        let call = std::panic::AssertUnwindSafe(super::trace::scope(ctx, future.instrument(span)))
            .catch_unwind();
        tokio::select! {
            biased;
            finished = call => {
                let result = finished.unwrap_or_else(|payload| Err(panicked(&*payload)));
                HandlerRun::Done(result, started.map_or(Duration::ZERO, |s| s.elapsed()))
            }
            () = deadline.reached() => HandlerRun::Interrupted,
        }
    }
}

fn panicked(payload: &(dyn std::any::Any + Send)) -> HandlerError {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".to_owned());
    HandlerError::new(format!("the handler panicked: {text}")).with_exception("Panic")
}
