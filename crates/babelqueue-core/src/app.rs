//! The runtime: [`App`] publishes envelopes and runs the consume loop that routes each delivery
//! to its handler and settles it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use babelqueue_envelope::{Builder, DeadLetter, Envelope, Message, poison_cause, poison_record};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::decide::{self, Facts, Failure, OnWriteFailure, Plan, Record, ReleaseBody, Unsettle};
use crate::error::{Error, Result, TransportError};
use crate::handler::{Context, Handler, HandlerError};
use crate::policy::{Backoff, Jitter, Policy, UnknownUrn};
use crate::transport::{Delivery, Headers, Route, Transport};

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

/// What the runtime reports about each delivery, for metrics and tracing.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// The consumed queue.
    pub queue: &'a str,
    /// The URN the delivery was routed by (`""` for poison and gated deliveries).
    pub urn: &'a str,
    /// How it ended.
    pub outcome: Outcome,
    /// The handler's run time and whether it succeeded, when a handler ran.
    pub handler: Option<(Duration, bool)>,
}

/// Receives an [`Event`] for every settled delivery (implemented by `babelqueue-otel`).
pub trait Observer: Send + Sync {
    /// Called once per delivery, after it is settled.
    fn on_event(&self, event: &Event<'_>);
}

/// How [`App::consume`] runs.
#[derive(Debug, Clone)]
#[must_use]
pub struct Consume {
    queue: Option<String>,
    max_messages: Option<u64>,
    idle_timeout: Option<Duration>,
    handle_signals: bool,
}

impl Default for Consume {
    fn default() -> Self {
        Consume {
            queue: None,
            max_messages: None,
            idle_timeout: None,
            handle_signals: true,
        }
    }
}

impl Consume {
    /// Consume forever (until stopped or signalled), from the app's queue.
    pub fn new() -> Consume {
        Consume::default()
    }
    /// Consume from this queue instead of the app's.
    pub fn queue(mut self, queue: impl Into<String>) -> Consume {
        self.queue = Some(queue.into());
        self
    }
    /// Stop after this many deliveries were settled. Without an
    /// [`idle_timeout`](Consume::idle_timeout) it also stops as soon as a poll finds the queue
    /// empty (a delayed message that is not visible yet counts as absent); with one, an empty
    /// poll waits for more until the queue has been idle that long.
    pub fn max_messages(mut self, max: u64) -> Consume {
        self.max_messages = Some(max);
        self
    }
    /// Stop when nothing arrived for this long.
    pub fn idle_timeout(mut self, idle: Duration) -> Consume {
        self.idle_timeout = Some(idle);
        self
    }
    /// Trap SIGTERM/SIGINT for a graceful shutdown (default on).
    pub fn handle_signals(mut self, on: bool) -> Consume {
        self.handle_signals = on;
        self
    }
}

/// What a consume run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Deliveries settled (handled, retried, dead-lettered, dropped, released, left unsettled).
    pub processed: u64,
    /// Deliveries given back unchanged because the loop was stopping or the deadline passed.
    pub released_at_shutdown: u64,
    /// Whether a signal ended the run (the transport was then closed).
    pub signalled: bool,
}

#[derive(Debug, Default)]
struct Stop {
    flag: AtomicBool,
    notify: Notify,
}

/// Asks a running consume loop to stop after its in-flight messages (thread-safe, cloneable).
/// A stop requested before the loop starts makes it return at once; the flag is cleared when
/// the loop returns.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<Stop>);

impl StopHandle {
    /// Requests the stop.
    pub fn stop(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Whether a stop was requested.
    pub fn is_stopping(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }
}

struct Inner {
    transport: Arc<dyn Transport>,
    queue: String,
    policy: Policy,
    handlers: HashMap<String, Arc<dyn Handler>>,
    fallback: Option<Arc<dyn Handler>>,
    concurrency: usize,
    shutdown_timeout: Duration,
    poll_timeout: Duration,
    rewind_pause: Duration,
    stop: Arc<Stop>,
    observer: Option<Arc<dyn Observer>>,
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
            .field("handlers", &urns)
            .finish_non_exhaustive()
    }
}

/// Configures an [`App`]. Defaults: queue `default`, `max_attempts` 3, dead-lettering off,
/// `on_unknown_urn` `fail`, no back-off, concurrency 1, `shutdown_timeout` 30 s.
#[must_use]
pub struct AppBuilder {
    transport: Arc<dyn Transport>,
    queue: String,
    policy: Policy,
    handlers: HashMap<String, Arc<dyn Handler>>,
    fallback: Option<Arc<dyn Handler>>,
    concurrency: usize,
    shutdown_timeout: Duration,
    poll_timeout: Duration,
    rewind_pause: Duration,
    observer: Option<Arc<dyn Observer>>,
}

impl fmt::Debug for AppBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppBuilder")
            .field("queue", &self.queue)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl AppBuilder {
    /// The default queue to publish to and consume from.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }
    /// Total deliveries allowed, the first included (default 3; 1 or less = no retry).
    pub fn max_attempts(mut self, max: i64) -> Self {
        self.policy.max_attempts = max;
        self
    }
    /// Dead-letter exhausted and poison messages (default off).
    pub fn dead_letter(mut self, on: bool) -> Self {
        self.policy.dead_letter = on;
        self
    }
    /// An explicit dead-letter queue.
    pub fn dead_letter_queue(mut self, queue: impl Into<String>) -> Self {
        self.policy.dead_letter_queue = Some(queue.into());
        self
    }
    /// The dead-letter suffix (default `.dlq`, or the transport's own rule).
    pub fn dead_letter_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.policy.dead_letter_suffix = Some(suffix.into());
        self
    }
    /// The unknown-URN strategy (default `fail`).
    pub fn on_unknown_urn(mut self, strategy: UnknownUrn) -> Self {
        self.policy.on_unknown_urn = strategy;
        self
    }
    /// The delay of the `release` strategy (default 0).
    pub fn unknown_urn_release_delay(mut self, delay: Duration) -> Self {
        self.policy.unknown_urn_release_delay = delay;
        self
    }
    /// The retry back-off base (default 0: immediate).
    pub fn retry_backoff(mut self, base: Duration) -> Self {
        self.policy.backoff.base = base.as_secs_f64();
        self
    }
    /// The back-off multiplier (default 1: constant).
    pub fn retry_backoff_multiplier(mut self, multiplier: f64) -> Self {
        self.policy.backoff.multiplier = multiplier;
        self
    }
    /// The back-off cap (default 0: none).
    pub fn retry_backoff_max(mut self, max: Duration) -> Self {
        self.policy.backoff.max = max.as_secs_f64();
        self
    }
    /// The back-off jitter (default none).
    pub fn retry_jitter(mut self, jitter: Jitter) -> Self {
        self.policy.backoff.jitter = jitter;
        self
    }
    /// The whole back-off at once.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.policy.backoff = backoff;
        self
    }
    /// The whole policy at once.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
    /// Handlers in flight at once per consume loop (default 1). The transport's prefetch (AMQP
    /// `basic_qos`, SQS batch size, Artemis link credit) follows it where the broker has one.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }
    /// How long a graceful shutdown waits for running handlers before releasing their
    /// messages unchanged (default 30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }
    /// How long one `pop` waits for a message (default 1 s).
    pub fn poll_timeout(mut self, timeout: Duration) -> Self {
        self.poll_timeout = timeout;
        self
    }
    /// The pause after rewinding an unsettled message, so a broken DLQ is not hammered
    /// (default 1 s).
    pub fn rewind_pause(mut self, pause: Duration) -> Self {
        self.rewind_pause = pause;
        self
    }
    /// Reports every settled delivery to `observer`.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }
    /// Routes `urn` (matched exactly) to `handler`; a later registration replaces an earlier one.
    pub fn handle(mut self, urn: impl Into<String>, handler: impl Handler) -> Self {
        self.handlers.insert(urn.into(), Arc::new(handler));
        self
    }
    /// Handles every URN that has no handler of its own (tools, bridges, the CLI). With a
    /// fallback, a valid envelope is never an unknown URN; poison and gated deliveries still
    /// never reach a handler.
    pub fn handle_any(mut self, handler: impl Handler) -> Self {
        self.fallback = Some(Arc::new(handler));
        self
    }
    /// Routes `urn` to an already shared handler.
    pub fn handle_arc(mut self, urn: impl Into<String>, handler: Arc<dyn Handler>) -> Self {
        self.handlers.insert(urn.into(), handler);
        self
    }
    /// Routes [`Message::URN`] to a closure that receives `data` as an `M`.
    pub fn handle_message<M, F, Fut>(self, f: F) -> Self
    where
        M: Message + serde::de::DeserializeOwned + Send + 'static,
        F: Fn(M, Context) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
    {
        self.handle(M::URN, crate::handler::typed::<M, F, Fut>(f))
    }

    /// Checks the configuration and builds the app.
    pub fn build(self) -> Result<App> {
        let bad = |m: String| Err(Error::Config(m));
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1".into());
        }
        if self.policy.dead_letter_suffix.as_deref() == Some("") {
            return bad("dead_letter_suffix is empty: the dead-letter queue would be the source queue itself".into());
        }
        if self.policy.dead_letter_queue.as_deref() == Some(self.queue.as_str()) {
            return bad(format!(
                "dead_letter_queue {:?} is the consumed queue itself",
                self.queue
            ));
        }
        let b = self.policy.backoff;
        for (name, v) in [
            ("retry_backoff", b.base),
            ("retry_backoff_multiplier", b.multiplier),
        ] {
            if !v.is_finite() || v < 0.0 {
                return bad(format!("{name} must be a finite number >= 0, got {v}"));
            }
        }
        if b.max.is_nan() {
            return bad("retry_backoff_max must be a number".into());
        }
        Ok(App {
            inner: Arc::new(Inner {
                transport: self.transport,
                queue: self.queue,
                policy: self.policy,
                handlers: self.handlers,
                fallback: self.fallback,
                concurrency: self.concurrency,
                shutdown_timeout: self.shutdown_timeout,
                poll_timeout: self.poll_timeout,
                rewind_pause: self.rewind_pause,
                stop: Arc::new(Stop::default()),
                observer: self.observer,
            }),
        })
    }
}

/// Fires once the shutdown deadline passes (never, for a direct `dispatch`).
#[derive(Clone)]
struct Deadline(Option<watch::Receiver<bool>>);

impl Deadline {
    async fn reached(&self) {
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

impl App {
    /// Starts configuring an app over `transport`.
    pub fn builder(transport: impl Transport + 'static) -> AppBuilder {
        App::builder_arc(Arc::new(transport))
    }

    /// Starts configuring an app over a shared transport.
    pub fn builder_arc(transport: Arc<dyn Transport>) -> AppBuilder {
        AppBuilder {
            transport,
            queue: "default".into(),
            policy: Policy::default(),
            handlers: HashMap::new(),
            fallback: None,
            concurrency: 1,
            shutdown_timeout: Duration::from_secs(30),
            poll_timeout: Duration::from_secs(1),
            rewind_pause: Duration::from_secs(1),
            observer: None,
        }
    }

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
        StopHandle(self.inner.stop.clone())
    }

    /// An envelope builder for `urn`, addressed to the app's queue.
    pub fn envelope(&self, urn: &str) -> Builder {
        Envelope::builder(urn).queue(self.inner.queue.clone())
    }

    /// Publishes `data` under `urn` to the app's queue; returns `meta.id`.
    pub async fn publish<T: serde::Serialize + ?Sized>(
        &self,
        urn: &str,
        data: &T,
    ) -> Result<String> {
        self.publish_to(&self.inner.queue.clone(), urn, data).await
    }

    /// Publishes `data` under `urn` to `queue`; returns `meta.id`.
    pub async fn publish_to<T: serde::Serialize + ?Sized>(
        &self,
        queue: &str,
        urn: &str,
        data: &T,
    ) -> Result<String> {
        let envelope = Envelope::builder(urn).queue(queue).data(data).build()?;
        self.publish_envelope(queue, &envelope, &Headers::new())
            .await?;
        Ok(envelope
            .message_id()
            .map(|id| id.into_owned())
            .unwrap_or_default())
    }

    /// Publishes a typed message to the app's queue; returns `meta.id`.
    pub async fn publish_message<M: Message + ?Sized>(&self, message: &M) -> Result<String> {
        let envelope = Builder::from_message(message)
            .queue(self.inner.queue.clone())
            .build()?;
        self.publish_envelope(&self.inner.queue.clone(), &envelope, &Headers::new())
            .await?;
        Ok(envelope
            .message_id()
            .map(|id| id.into_owned())
            .unwrap_or_default())
    }

    /// Publishes an envelope to `queue` with out-of-band `headers`. Headers need the transport's
    /// [`HeaderPublisher`](crate::HeaderPublisher) capability; without it (or with no header)
    /// this is a plain publish. Headers never enter the envelope.
    pub async fn publish_envelope(
        &self,
        queue: &str,
        envelope: &Envelope,
        headers: &Headers,
    ) -> Result<()> {
        let body = envelope.encode()?;
        let transport = &self.inner.transport;
        match transport.header_publisher() {
            Some(publisher) if !headers.is_empty() => {
                publisher
                    .publish_with_headers(queue, body.as_bytes(), headers)
                    .await?;
            }
            _ => transport.publish(queue, body.as_bytes()).await?,
        }
        Ok(())
    }

    /// Publishes an envelope that becomes deliverable after `delay` (needs the transport's
    /// [`DelayedPublisher`](crate::DelayedPublisher) capability).
    pub async fn publish_delayed(
        &self,
        queue: &str,
        envelope: &Envelope,
        delay: Duration,
    ) -> Result<()> {
        let body = envelope.encode()?;
        let Some(publisher) = self.inner.transport.delayed_publisher() else {
            return Err(Error::Config(format!(
                "the {} transport cannot delay a message (no DelayedPublisher capability)",
                self.inner.transport.name()
            )));
        };
        publisher
            .publish_delayed(queue, body.as_bytes(), delay)
            .await?;
        Ok(())
    }

    /// Consumes forever from the app's queue, with graceful shutdown on SIGTERM/SIGINT.
    pub async fn run(&self) -> Result<Summary> {
        self.consume(Consume::new()).await
    }

    /// Routes one delivery the caller already popped, and settles it.
    pub async fn dispatch(&self, delivery: Delivery) -> Outcome {
        self.inner.clone().dispatch(delivery, Deadline(None)).await
    }

    /// Runs the consume loop.
    ///
    /// Up to `concurrency` handlers run at once. On the first SIGTERM/SIGINT (when
    /// `handle_signals`) or a [`StopHandle::stop`], no new message is taken and running handlers
    /// finish and settle; a signal also starts the `shutdown_timeout` deadline, after which a
    /// handler still running is interrupted and its message released unchanged (never one whose
    /// settlement had begun). A second signal brings the deadline forward to now.
    pub async fn consume(&self, options: Consume) -> Result<Summary> {
        let inner = &self.inner;
        let queue = options.queue.clone().unwrap_or_else(|| inner.queue.clone());
        if inner
            .transport
            .redeliverer()
            .is_some_and(|r| !r.can_redeliver())
            && inner.policy.max_attempts > 1
        {
            tracing::warn!(
                target: LOG,
                "The {} transport cannot redeliver a message with this configuration (no retry tiers) but \
                 max_attempts is {}: a failing handler's message is left unsettled and comes back in place. \
                 Configure retry tiers, or set max_attempts to 1.",
                inner.transport.name(),
                inner.policy.max_attempts
            );
        }
        match inner
            .transport
            .prepare_consume(&queue, inner.concurrency)
            .await
        {
            Ok(()) => {}
            // A broker that is down now may be back by the first poll; the loop retries.
            Err(e) if e.is_transient() => {
                tracing::warn!(target: LOG, queue = %queue, error = %e, "Preparing to consume {queue:?} failed; polling anyway");
            }
            Err(e) => return Err(e.into()),
        }
        let (deadline_tx, deadline_rx) = watch::channel(false);
        let deadline_tx = Arc::new(deadline_tx);
        let signalled = Arc::new(AtomicBool::new(false));
        let signals = options.handle_signals.then(|| {
            spawn_signal_listener(
                inner.stop.clone(),
                signalled.clone(),
                deadline_tx.clone(),
                inner.shutdown_timeout,
            )
        });

        let mut summary = Summary::default();
        let mut running: JoinSet<Outcome> = JoinSet::new();
        let mut last_arrival = tokio::time::Instant::now();
        let mut fatal: Option<TransportError> = None;
        loop {
            while let Some(done) = running.try_join_next() {
                count(&mut summary, Some(done));
            }
            if inner.stop.flag.load(Ordering::SeqCst) {
                break;
            }
            let started = summary.processed + running.len() as u64;
            if options.max_messages.is_some_and(|max| started >= max) {
                if running.is_empty() {
                    break;
                }
                count(&mut summary, running.join_next().await);
                continue;
            }
            if running.len() >= inner.concurrency {
                tokio::select! {
                    done = running.join_next() => count(&mut summary, done),
                    () = inner.stop.notify.notified() => {}
                }
                continue;
            }
            let popped = inner.transport.pop(&queue, inner.poll_timeout).await;
            match popped {
                Ok(Some(delivery)) => {
                    last_arrival = tokio::time::Instant::now();
                    if inner.stop.flag.load(Ordering::SeqCst) {
                        // Reserved after the stop was requested: hand it straight back.
                        inner.release_unprocessed(&delivery).await;
                        summary.released_at_shutdown += 1;
                        break;
                    }
                    let task = inner.clone();
                    let deadline = Deadline(Some(deadline_rx.clone()));
                    running.spawn(async move { task.dispatch(delivery, deadline).await });
                }
                Ok(None) => {
                    if running.is_empty() {
                        if options.max_messages.is_some() && options.idle_timeout.is_none() {
                            break;
                        }
                        if options
                            .idle_timeout
                            .is_some_and(|idle| last_arrival.elapsed() >= idle)
                        {
                            break;
                        }
                    } else {
                        last_arrival = tokio::time::Instant::now();
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        crate::error::TransportErrorKind::Auth
                            | crate::error::TransportErrorKind::Config
                    ) =>
                {
                    // Wrong credentials, or a consumer its client gave up on (a configuration it
                    // refuses, a fenced static member), do not heal by polling again: stop, and
                    // say why.
                    tracing::error!(target: LOG, queue = %queue, error = %e, "Receiving from {queue:?} cannot work ({:?}); stopping", e.kind());
                    fatal = Some(e);
                    break;
                }
                Err(e) => {
                    tracing::error!(target: LOG, queue = %queue, error = %e, "Receiving from queue {queue:?} failed; retrying");
                    inner
                        .pause(if e.is_transient() {
                            inner.poll_timeout
                        } else {
                            inner.rewind_pause
                        })
                        .await;
                    // Nothing arrives while the broker fails: that time counts towards the
                    // idle timeout too.
                    if running.is_empty()
                        && options
                            .idle_timeout
                            .is_some_and(|idle| last_arrival.elapsed() >= idle)
                    {
                        break;
                    }
                }
            }
        }
        while let Some(done) = running.join_next().await {
            count(&mut summary, Some(done));
        }
        if let Some(listener) = signals {
            listener.abort();
        }
        inner.stop.flag.store(false, Ordering::SeqCst);
        if let Some(e) = fatal {
            return Err(e.into());
        }
        summary.signalled = signalled.load(Ordering::SeqCst);
        if summary.signalled
            && let Err(e) = inner.transport.close().await
        {
            tracing::error!(target: LOG, error = %e, "Closing the transport failed");
        }
        Ok(summary)
    }
}

fn count(
    summary: &mut Summary,
    done: Option<std::result::Result<Outcome, tokio::task::JoinError>>,
) {
    match done {
        Some(Ok(Outcome::Interrupted)) => summary.released_at_shutdown += 1,
        Some(Ok(_)) => summary.processed += 1,
        Some(Err(e)) => {
            tracing::error!(target: LOG, error = %e, "A dispatch task ended abnormally")
        }
        None => {}
    }
}

fn spawn_signal_listener(
    stop: Arc<Stop>,
    signalled: Arc<AtomicBool>,
    deadline: Arc<watch::Sender<bool>>,
    shutdown_timeout: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if wait_for_signal().await.is_err() {
            return;
        }
        tracing::warn!(target: LOG, "Shutdown signal received: finishing in-flight messages (deadline {shutdown_timeout:?})");
        signalled.store(true, Ordering::SeqCst);
        stop.flag.store(true, Ordering::SeqCst);
        stop.notify.notify_waiters();
        let timer = {
            let deadline = deadline.clone();
            tokio::spawn(async move {
                tokio::time::sleep(shutdown_timeout).await;
                deadline.send_replace(true);
            })
        };
        if wait_for_signal().await.is_ok() {
            tracing::warn!(target: LOG, "Second signal: interrupting running handlers now");
            deadline.send_replace(true);
        }
        timer.abort();
    })
}

#[cfg(unix)]
async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn wait_for_signal() -> std::io::Result<()> {
    tokio::signal::ctrl_c().await
}

enum HandlerRun {
    Done(std::result::Result<(), HandlerError>, Duration),
    Interrupted,
}

impl Inner {
    fn facts(&self, queue: &str) -> Facts {
        let transport = &self.transport;
        Facts {
            queue: queue.to_owned(),
            dead_letter_queue: decide::dead_letter_queue(
                &self.policy,
                queue,
                transport.dead_letter_namer(),
            ),
            native_settler: transport.native_settler().is_some(),
            can_redeliver: transport.redeliverer().is_none_or(|r| r.can_redeliver()),
        }
    }

    fn native_attempts(&self, delivery: &Delivery) -> i64 {
        self.transport
            .delivery_counter()
            .map_or(0, |c| c.native_attempts(delivery))
    }

    async fn dispatch(self: Arc<Self>, delivery: Delivery, deadline: Deadline) -> Outcome {
        let mut sampler = |low: f64, high: f64| low + (high - low) * fastrand::f64();
        let facts = self.facts(delivery.queue());
        let policy = &self.policy;
        let mut envelope: Option<Envelope> = None;
        let mut urn = String::new();
        let mut handler_run = None;
        let plan = match delivery.route() {
            Route::Gated { .. } => decide::gated(policy, &facts),
            Route::TransportPoison(poison) => {
                decide::transport_poison(policy, &facts, poison, &mut sampler)
            }
            Route::NonNumericAttempts => decide::non_numeric_attempts(&facts),
            route => {
                let cause = if self.transport.classifies_poison() {
                    None
                } else {
                    poison_cause(delivery.body(), !route.is_out_of_band())
                };
                if let Some(cause) = cause {
                    let attempts =
                        decide::poison_attempts(self.native_attempts(&delivery), delivery.body());
                    decide::poison(policy, &facts, attempts, &cause.to_string(), &mut sampler)
                } else {
                    let decoded = Envelope::decode_lenient(delivery.body()).envelope;
                    urn = match route {
                        Route::Urn(routed) if !decoded.is_empty() => routed.clone(),
                        _ => decoded.urn().into_owned(),
                    };
                    let attempts = decoded.attempts();
                    let handler = if urn.is_empty() {
                        None
                    } else {
                        self.handlers.get(&urn).or(self.fallback.as_ref()).cloned()
                    };
                    let plan = match handler {
                        None => decide::unknown_urn(policy, &facts, &urn, attempts, &mut sampler),
                        Some(handler) => {
                            let routed = if route.is_out_of_band() {
                                urn.clone()
                            } else {
                                String::new()
                            };
                            let ctx = Context::with_route(
                                decoded.clone(),
                                delivery.queue(),
                                delivery.headers().clone(),
                                routed,
                                self.native_attempts(&delivery),
                            );
                            match self.run_handler(handler, ctx, &deadline).await {
                                HandlerRun::Interrupted => {
                                    tracing::warn!(target: LOG, queue = delivery.queue(), urn = %urn,
                                        "Shutdown deadline passed while the handler was running: releasing the message unchanged");
                                    self.release_unprocessed(&delivery).await;
                                    self.observe(&delivery, &urn, Outcome::Interrupted, None);
                                    return Outcome::Interrupted;
                                }
                                HandlerRun::Done(Ok(()), took) => {
                                    handler_run = Some((took, true));
                                    Plan::Ack
                                }
                                HandlerRun::Done(Err(e), took) => {
                                    handler_run = Some((took, false));
                                    tracing::warn!(target: LOG, queue = delivery.queue(), urn = %urn, attempts,
                                        error = %e, "Handler failed");
                                    let failure = Failure {
                                        message: e.message().to_owned(),
                                        exception: e.exception().to_owned(),
                                        action: e.action(),
                                        unknown_urn: false,
                                    };
                                    decide::failure(
                                        policy,
                                        &facts,
                                        attempts,
                                        &failure,
                                        &mut sampler,
                                    )
                                }
                            }
                        }
                    };
                    envelope = Some(decoded);
                    plan
                }
            }
        };
        let outcome = self
            .execute(&delivery, envelope.as_ref(), &facts, plan, &mut sampler)
            .await;
        self.observe(&delivery, &urn, outcome, handler_run);
        outcome
    }

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
            });
        }
    }

    async fn run_handler(
        &self,
        handler: Arc<dyn Handler>,
        ctx: Context,
        deadline: &Deadline,
    ) -> HandlerRun {
        let started = Instant::now();
        let mut task = tokio::spawn(handler.call(ctx));
        tokio::select! {
            biased;
            joined = &mut task => {
                let result = match joined {
                    Ok(result) => result,
                    Err(e) if e.is_panic() => {
                        let payload = e.into_panic();
                        let text = payload
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| payload.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a non-string panic".to_owned());
                        Err(HandlerError::new(format!("the handler panicked: {text}")).with_exception("Panic"))
                    }
                    Err(_) => Err(HandlerError::new("the handler task was cancelled").with_exception("Cancelled")),
                };
                HandlerRun::Done(result, started.elapsed())
            }
            () = deadline.reached() => {
                task.abort();
                HandlerRun::Interrupted
            }
        }
    }

    fn record_bytes(
        &self,
        delivery: &Delivery,
        envelope: Option<&Envelope>,
        record: &Record,
    ) -> std::result::Result<Vec<u8>, Error> {
        let now = babelqueue_envelope::now_millis();
        match record {
            Record::Raw => Ok(delivery.body().to_vec()),
            Record::Poison {
                attempts,
                cause,
                original_queue,
            } => {
                let error = match cause {
                    Some(cause) => format!("Undecodable BabelQueue body: {cause}"),
                    None => "Undecodable BabelQueue body".to_owned(),
                };
                let block = DeadLetter::new(
                    babelqueue_envelope::Reason::Poison,
                    original_queue.clone(),
                    *attempts,
                    now,
                )
                .with_error(error, "BabelQueueError");
                Ok(poison_record(delivery.body(), &block))
            }
            Record::Annotated {
                reason,
                attempts,
                error,
            } => {
                let mut copy = envelope.cloned().unwrap_or_default();
                copy.set_attempts(*attempts);
                let original_queue = copy
                    .queue()
                    .filter(|q| !q.is_empty())
                    .map_or_else(|| delivery.queue().to_owned(), |q| q.into_owned());
                let mut block = DeadLetter::new(*reason, original_queue, *attempts, now);
                if let Some((message, exception)) = error {
                    block = block.with_error(message.clone(), exception.clone());
                }
                Ok(copy.annotate(&block).encode()?.into_bytes())
            }
        }
    }

    fn release_body(
        &self,
        delivery: &Delivery,
        envelope: Option<&Envelope>,
        body: ReleaseBody,
    ) -> std::result::Result<Vec<u8>, Error> {
        match body {
            ReleaseBody::Unchanged => Ok(normalised(delivery.body())),
            ReleaseBody::Counted(n) => {
                let mut copy = envelope.cloned().unwrap_or_default();
                copy.set_attempts(n);
                Ok(copy.encode()?.into_bytes())
            }
            ReleaseBody::Bare(n) => Ok(format!("{{\"attempts\":{n}}}").into_bytes()),
        }
    }

    fn execute<'a>(
        &'a self,
        delivery: &'a Delivery,
        envelope: Option<&'a Envelope>,
        facts: &'a Facts,
        plan: Plan,
        sampler: decide::Sampler<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send + 'a>> {
        Box::pin(async move {
            let queue = delivery.queue();
            match plan {
                Plan::Ack => {
                    self.ack(delivery).await;
                    Outcome::Acked
                }
                Plan::Drop(reason) => {
                    tracing::warn!(target: LOG, queue, route = %delivery.route().as_str(), "Dropping a message on queue {queue:?}: {}", describe_drop(&reason, delivery));
                    self.ack(delivery).await;
                    Outcome::Dropped
                }
                Plan::Release { body, delay } => {
                    let retry = !matches!(body, ReleaseBody::Unchanged);
                    let written = match self.release_body(delivery, envelope, body) {
                        Ok(bytes) => self
                            .release(delivery, &bytes, delay)
                            .await
                            .map_err(Error::from),
                        Err(e) => Err(e),
                    };
                    match written {
                        Ok(()) => {
                            if retry {
                                Outcome::Retried
                            } else {
                                Outcome::Released
                            }
                        }
                        Err(e) => {
                            tracing::error!(target: LOG, queue, route = %delivery.route().as_str(), error = %e,
                                "Re-publishing a message for retry on queue {queue:?} failed; it was NOT acknowledged and will be redelivered");
                            self.leave_unsettled(delivery, Unsettle::Rewind).await;
                            Outcome::Unsettled
                        }
                    }
                }
                Plan::DeadLetter {
                    queue: dlq,
                    record,
                    on_failure,
                } => {
                    let written = match self.record_bytes(delivery, envelope, &record) {
                        Ok(bytes) => self
                            .write_dead_letter(delivery, &dlq, &bytes)
                            .await
                            .map_err(Error::from),
                        Err(e) => Err(e),
                    };
                    match (written, on_failure) {
                        (Ok(()), _) => Outcome::DeadLettered,
                        (Err(e), OnWriteFailure::Leave(unsettle)) => {
                            tracing::error!(target: LOG, queue, dead_letter_queue = %dlq, error = %e,
                                "Dead-lettering a message from queue {queue:?} to {dlq:?} failed; it was NOT acknowledged \
                                 or retried, and will come back (the write is tried again then); the worker keeps running");
                            self.leave_unsettled(delivery, unsettle).await;
                            Outcome::Unsettled
                        }
                        (Err(e), OnWriteFailure::Fail) => {
                            tracing::error!(target: LOG, queue, dead_letter_queue = %dlq, error = %e,
                                "Dead-lettering an unknown-URN message failed; taking the retry path");
                            let failure = Failure {
                                message: e.to_string(),
                                exception: "TransportError".to_owned(),
                                action: crate::handler::Action::Retry,
                                unknown_urn: true,
                            };
                            let attempts = envelope.map_or(0, Envelope::attempts);
                            let plan =
                                decide::failure(&self.policy, facts, attempts, &failure, sampler);
                            self.execute(delivery, envelope, facts, plan, sampler).await
                        }
                    }
                }
                Plan::Native {
                    reason,
                    description,
                } => {
                    tracing::warn!(target: LOG, queue, route = %delivery.route().as_str(), reason,
                        "Left to the broker's native mechanism (not acknowledged, not retried): queue {queue:?}, reason {reason}");
                    if let Some(settler) = self.transport.native_settler()
                        && let Err(e) = settler.settle_native(delivery, reason, &description).await
                    {
                        tracing::error!(target: LOG, queue, error = %e,
                            "Native settle of a message on queue {queue:?} failed; it stays unacknowledged and will be redelivered");
                    }
                    Outcome::Native
                }
                Plan::LeaveUnsettled(unsettle) => {
                    self.leave_unsettled(delivery, unsettle).await;
                    Outcome::Unsettled
                }
            }
        })
    }

    async fn ack(&self, delivery: &Delivery) {
        if let Err(e) = self.transport.ack(delivery).await {
            tracing::error!(target: LOG, queue = delivery.queue(), error = %e,
                "Failed to acknowledge a processed message on queue {:?}; it was NOT released and will be redelivered by the broker",
                delivery.queue());
        }
    }

    /// Publish keeping the route: a confirmed settle write, else a routed publish, else plain.
    async fn publish_for(
        &self,
        delivery: &Delivery,
        queue: &str,
        body: &[u8],
    ) -> std::result::Result<(), TransportError> {
        crate::transport::publish_keeping_route(self.transport.as_ref(), delivery, queue, body)
            .await
    }

    async fn release(
        &self,
        delivery: &Delivery,
        body: &[u8],
        delay: Duration,
    ) -> std::result::Result<(), TransportError> {
        if let Some(redeliverer) = self.transport.redeliverer() {
            return redeliverer.redeliver(delivery, body, delay).await;
        }
        self.publish_for(delivery, delivery.queue(), body).await?;
        self.ack(delivery).await;
        Ok(())
    }

    async fn write_dead_letter(
        &self,
        delivery: &Delivery,
        queue: &str,
        body: &[u8],
    ) -> std::result::Result<(), TransportError> {
        if let Some(writer) = self.transport.dead_letter_writer() {
            return writer.dead_letter(delivery, queue, body).await;
        }
        self.publish_for(delivery, queue, body).await?;
        self.ack(delivery).await;
        Ok(())
    }

    async fn leave_unsettled(&self, delivery: &Delivery, unsettle: Unsettle) {
        let transport = &self.transport;
        if unsettle == Unsettle::AbandonOrRewind
            && transport.rewinder().is_none()
            && let Some(abandoner) = transport.abandoner()
        {
            if let Err(e) = abandoner.abandon(delivery).await {
                tracing::error!(target: LOG, queue = delivery.queue(), error = %e, "Failed to abandon an unsettled message");
                return;
            }
            self.pause(self.rewind_pause).await;
            return;
        }
        if let Some(rewinder) = transport.rewinder() {
            // A version-gated delivery is never written back to its queue (the contract allows
            // only its dead-letter write), so it is rewound in place; any other message whose
            // settle write failed moves behind the others where the broker can.
            let rewound = match unsettle {
                Unsettle::AbandonOrRewind => rewinder.rewind(delivery).await,
                Unsettle::Rewind => rewinder.rewind_behind(delivery).await,
            };
            if let Err(e) = rewound {
                tracing::error!(target: LOG, queue = delivery.queue(), error = %e, "Failed to rewind an unsettled message");
                return;
            }
            self.pause(self.rewind_pause).await;
        }
    }

    /// Gives back a message whose handler never completed: rewound where possible, else
    /// released unchanged with no delay and no attempt counted.
    async fn release_unprocessed(&self, delivery: &Delivery) {
        if let Some(rewinder) = self.transport.rewinder() {
            if let Err(e) = rewinder.rewind(delivery).await {
                tracing::error!(target: LOG, queue = delivery.queue(), error = %e,
                    "Failed to rewind an unprocessed message at shutdown; the broker will redeliver it");
            }
            return;
        }
        let body = normalised(delivery.body());
        if let Err(e) = self.release(delivery, &body, Duration::ZERO).await {
            tracing::error!(target: LOG, queue = delivery.queue(), error = %e,
                "Failed to release an unprocessed message at shutdown; it is left unsettled and the broker will redeliver it");
        }
    }

    /// Sleeps, waking early on a stop request.
    async fn pause(&self, pause: Duration) {
        if self.stop.flag.load(Ordering::SeqCst) {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = self.stop.notify.notified() => {}
        }
    }
}

fn describe_drop(reason: &decide::DropReason, delivery: &Delivery) -> String {
    use decide::DropReason;
    match reason {
        DropReason::RetriesExhausted { attempts } => {
            format!(
                "after {attempts} attempts: retries are exhausted and no dead-letter queue is configured"
            )
        }
        DropReason::PoisonDeleted { cause } => {
            format!("a poison message (on_unknown_urn=delete): {cause}")
        }
        DropReason::Undeliverable => format!(
            "an undeliverable message ({} body bytes): it can never be handled and no dead-letter queue is configured",
            delivery.body().len()
        ),
        DropReason::PoisonCannotRetry => {
            "a poison record: the transport cannot redeliver it and dead-lettering is off \
             (degrade-to-delete); enable dead_letter to keep it"
                .to_owned()
        }
        DropReason::Rejected { message } => {
            format!("rejected by its handler ({message}) and no dead-letter queue is configured")
        }
    }
}

/// A raw body to re-publish: byte for byte, unless it is an object carrying a forbidden key or a
/// top-level `urn`, which are then dropped/folded by a decode → encode.
pub(crate) fn normalised(body: &[u8]) -> Vec<u8> {
    match Envelope::parse_object(body) {
        Ok(parsed) if parsed.forbidden_key().is_some() => Envelope::decode_lenient(body)
            .envelope
            .encode()
            .map_or_else(|_| body.to_vec(), String::into_bytes),
        _ => body.to_vec(),
    }
}
