//! The consume loop: up to `concurrency` deliveries at once, and the graceful shutdown.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use futures_util::FutureExt as _;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use tokio::sync::{Notify, watch};

use super::dispatch::{Deadline, Dispatched};
use super::{App, Inner, LOG, Outcome};
use crate::error::{Result, TransportError};
use crate::transport::{Delivery, Redelivery};

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
pub(super) struct Stop {
    pub(super) flag: AtomicBool,
    pub(super) notify: Notify,
}

/// Asks a running consume loop to stop after its in-flight messages (thread-safe, cloneable).
/// A stop requested before the loop starts makes it return at once; the flag is cleared when
/// the loop returns.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<Stop>);

impl StopHandle {
    pub(super) fn new(stop: Arc<Stop>) -> StopHandle {
        StopHandle(stop)
    }

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

impl App {
    /// Consumes forever from the app's queue, with graceful shutdown on SIGTERM/SIGINT.
    pub async fn run(&self) -> Result<Summary> {
        self.consume(Consume::new()).await
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
        let capabilities = inner.transport.capabilities();
        // Listening from the first poll, before anything is awaited: a signal that lands before
        // the listener task first runs is kept for it, not fatal to the process.
        let listening = match options.handle_signals.then(Signals::listen) {
            Some(Ok(signals)) => Some(signals),
            Some(Err(e)) => {
                tracing::warn!(target: LOG, error = %e, "Cannot listen for shutdown signals; stop this worker with a StopHandle");
                None
            }
            None => None,
        };
        if matches!(capabilities.redelivery_mode(), Redelivery::Impossible)
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
        if inner.policy.backoff.base > 0.0
            && matches!(capabilities.redelivery_mode(), Redelivery::Copy)
            && !crate::send::copies_delayed(capabilities.send_parts())
        {
            tracing::warn!(
                target: LOG,
                "The {} transport cannot delay a message: a retry is sent back at once, and \
                 retry_backoff is not honoured.",
                inner.transport.name()
            );
        }
        match inner
            .transport
            .prepare_consume(&queue, inner.prefetch)
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
        let signals = listening.map(|signals| {
            spawn_signal_listener(
                signals,
                inner.stop.clone(),
                signalled.clone(),
                deadline_tx.clone(),
                inner.shutdown_timeout,
            )
        });

        let mut summary = Summary::default();
        // Received and not started yet (at most `prefetch` held with those running).
        let mut ready: VecDeque<Delivery> = VecDeque::new();
        // The dispatches in flight: polled by this task at concurrency 1, a task each above.
        let mut running = Running::new(inner.concurrency);
        // Above concurrency 1: whether a new dispatch is first polled here (see `start`).
        let mut inline = Inline::default();
        // A receive in progress. It is never cancelled (a reserved delivery would be
        // stranded): when a dispatch finishes first, the receive stays pending for the next
        // round.
        let mut receiving: Option<Receiving<'_>> = None;
        // Acknowledgements gathered for a transport that sends them in batches; sent when a
        // batch is full, before the loop asks for more deliveries, and before it waits for
        // anything.
        let gather = capabilities.batch_acker().is_some();
        let mut gathered: Vec<Delivery> = Vec::new();
        let ack_batch = inner.prefetch.max(ACK_BATCH);
        // When the receive in progress first had to wait (unset while it answered at once:
        // the clock is read only on the way to a wait).
        let mut receive_waited: Option<tokio::time::Instant> = None;
        // When the loop last saw work, for an idle timeout.
        let mut idle = Idle::new(options.idle_timeout);
        let mut fatal: Option<TransportError> = None;
        // Whether the last dispatch started finished at its first poll: with a per-slot
        // prefetch from the transport, deliveries beyond the free slots are asked for only
        // then (a handler that waits would leave them waiting behind it, their locks running).
        let mut quick = false;
        loop {
            while let Some(Some(done)) = running.next().now_or_never() {
                count(&mut summary, &mut idle, done, &mut gathered);
            }
            if gathered.len() >= ack_batch {
                inner.ack_gathered(&mut gathered).await;
            }
            if inner.stop.flag.load(Ordering::SeqCst) {
                break;
            }
            // Deliveries keep coming, but each is a message this run already gave back
            // unchanged (an unknown URN under the `release` strategy): that is no work.
            if running.is_empty() && ready.is_empty() && idle.expired() {
                break;
            }
            if running.len() < inner.concurrency
                && let Some(delivery) = ready.pop_front()
            {
                // Taken back by the broker while it waited (its channel closed): the broker
                // hands it out again, so it is not handled here as well.
                if let Some(check) = capabilities.hold_checker()
                    && !check.still_held(&delivery)
                {
                    tracing::debug!(target: LOG, queue = %queue, "A received delivery was taken back by the broker before it started; not handled here");
                    continue;
                }
                match start(inner, delivery, &deadline_rx, gather, &mut inline) {
                    Started::Finished(done) => {
                        quick = true;
                        count(&mut summary, &mut idle, done, &mut gathered);
                    }
                    Started::Running(dispatch) => {
                        quick = false;
                        running.push(dispatch);
                    }
                }
                continue;
            }
            let held = running.len() + ready.len();
            let started = summary.processed + held as u64;
            let room = if inner.prefetch_follows_handlers && !quick {
                inner.concurrency
            } else {
                inner.prefetch
            };
            let wanted = options
                .max_messages
                .map_or(usize::MAX, |max| {
                    usize::try_from(max.saturating_sub(started)).unwrap_or(usize::MAX)
                })
                .min(room.saturating_sub(held));
            if receiving.is_none() && wanted == 0 {
                if running.is_empty() && ready.is_empty() {
                    break; // max_messages reached and settled
                }
                inner.ack_gathered(&mut gathered).await;
                tokio::select! {
                    done = running.next() => if let Some(done) = done { count(&mut summary, &mut idle, done, &mut gathered) },
                    () = inner.stop.notify.notified() => {}
                }
                continue;
            }
            if receiving.is_none() {
                // Before asking the broker for more, it hears what was handled: a broker that
                // orders by group (SQS FIFO) holds the next messages back while one is unsettled.
                inner.ack_gathered(&mut gathered).await;
            }
            let receive = receiving.get_or_insert_with(|| {
                receive_waited = None;
                // Already a pinned box (an `async_trait` method): not boxed a second time.
                inner.transport.receive(&queue, wanted, inner.poll_timeout)
            });
            let received = match receive.as_mut().now_or_never() {
                Some(received) => received,
                None => {
                    receive_waited.get_or_insert_with(tokio::time::Instant::now);
                    // About to wait: nothing gathered is held back meanwhile.
                    inner.ack_gathered(&mut gathered).await;
                    if running.is_empty() {
                        receive.await
                    } else {
                        tokio::select! {
                            biased;
                            done = running.next() => {
                                if let Some(done) = done {
                                    count(&mut summary, &mut idle, done, &mut gathered);
                                }
                                continue;
                            }
                            received = receive => received,
                        }
                    }
                }
            };
            receiving = None;
            match received {
                Ok(deliveries) if !deliveries.is_empty() => {
                    ready.extend(deliveries);
                    if inner.stop.flag.load(Ordering::SeqCst) {
                        // Reserved after the stop was requested: handed straight back below.
                        break;
                    }
                }
                Ok(_) => {
                    if running.is_empty() && ready.is_empty() {
                        if options.max_messages.is_some() && options.idle_timeout.is_none() {
                            break;
                        }
                        if idle.expired() {
                            break;
                        }
                    } else {
                        idle.busy();
                    }
                    // A transport may answer an empty receive before the poll timeout (a short
                    // poll, an in-memory fake): wait out the rest, so that the loop never spins
                    // on a queue that stays empty (it would starve the runtime's other tasks,
                    // timers included). A stop or a finished dispatch ends the wait early.
                    let rest = inner.poll_timeout.saturating_sub(
                        receive_waited.map_or(Duration::ZERO, |since| since.elapsed()),
                    );
                    if !rest.is_zero() {
                        inner.ack_gathered(&mut gathered).await;
                        tokio::select! {
                            () = tokio::time::sleep(rest) => {}
                            () = inner.stop.notify.notified() => {}
                            done = running.next(), if !running.is_empty() => {
                                if let Some(done) = done {
                                    count(&mut summary, &mut idle, done, &mut gathered);
                                }
                            }
                        }
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
                    inner.ack_gathered(&mut gathered).await;
                    // The dispatches in flight go on while the loop pauses.
                    let pause = inner.pause(if e.is_transient() {
                        inner.poll_timeout
                    } else {
                        inner.rewind_pause
                    });
                    tokio::pin!(pause);
                    loop {
                        tokio::select! {
                            () = &mut pause => break,
                            done = running.next(), if !running.is_empty() => {
                                if let Some(done) = done {
                                    count(&mut summary, &mut idle, done, &mut gathered);
                                }
                            }
                        }
                    }
                    // Nothing arrives while the broker fails: that time counts towards the
                    // idle timeout too.
                    if running.is_empty() && idle.expired() {
                        break;
                    }
                }
            }
        }
        // A receive still in progress is finished, never dropped: what it reserved goes back,
        // with every delivery received and not started.
        if let Some(receive) = receiving.take() {
            let (received, ()) = tokio::join!(receive, async {
                while let Some(done) = running.next().await {
                    count(&mut summary, &mut idle, done, &mut gathered);
                }
            });
            if let Ok(deliveries) = received {
                ready.extend(deliveries);
            }
        }
        for delivery in ready.drain(..) {
            inner.release_unprocessed(&delivery).await;
            summary.released_at_shutdown += 1;
        }
        while let Some(done) = running.next().await {
            count(&mut summary, &mut idle, done, &mut gathered);
        }
        inner.ack_gathered(&mut gathered).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_first_polls_stop_for_good_after_three_long_polls_in_a_row() {
        let long = Inline::BUDGET + Duration::from_micros(1);
        let mut inline = Inline::default();
        assert!(inline.on);
        for took in [Duration::ZERO, Duration::from_micros(50), Inline::BUDGET] {
            inline.polled(took);
            assert!(inline.on, "{took:?} is within the budget");
        }
        // Long polls among quick ones (a preempted thread) leave them on.
        for took in [long, long, Duration::ZERO, long, Duration::ZERO, long, long] {
            inline.polled(took);
            assert!(inline.on, "never three long polls in a row");
        }
        inline.polled(long);
        assert!(!inline.on, "the third long poll in a row");
        inline.polled(Duration::ZERO);
        assert!(!inline.on, "a quick poll later does not turn them back on");
    }

    #[test]
    fn one_first_poll_in_eight_is_timed_and_every_one_after_a_long_one() {
        let mut inline = Inline::default();
        let timed: Vec<bool> = (0..17).map(|_| inline.timed()).collect();
        let expected: Vec<bool> = (0..17).map(|i| i % 8 == 0).collect();
        assert_eq!(timed, expected, "the first, the ninth and the seventeenth");
        // A long timed poll opens a streak: every poll is timed until a quick one.
        inline.polled(Inline::BUDGET + Duration::from_micros(1));
        assert!(inline.timed() && inline.timed() && inline.timed());
        inline.polled(Duration::ZERO);
        assert!(!inline.timed(), "sampling again after the quick one");
        // A handler that computes every time: three timed long polls in a row, within the
        // first SAMPLE + 2 messages.
        let mut inline = Inline::default();
        let long = Inline::BUDGET * 2;
        let mut messages = 0;
        while inline.on {
            messages += 1;
            if inline.timed() {
                inline.polled(long);
            }
        }
        assert_eq!(
            messages, 3,
            "the first three polls: one sampled, then the streak"
        );
    }
}

/// Acknowledgements gathered before they are sent together, at least.
const ACK_BATCH: usize = 64;

/// A dispatch in flight: what it did, or the payload of a panic outside the handler (a handler
/// panic is already a failure).
type Dispatching<'a> = Pin<Box<dyn Future<Output = std::thread::Result<Dispatched>> + Send + 'a>>;

/// A receive in flight.
type Receiving<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<Vec<Delivery>, TransportError>> + Send + 'a>>;

/// The dispatches in flight: one slot polled in place at concurrency 1 (no task bookkeeping
/// per message), a [`FuturesUnordered`] of spawned tasks above.
enum Running<'a> {
    One(Option<Dispatching<'a>>),
    Many(FuturesUnordered<Dispatching<'a>>),
}

impl<'a> Running<'a> {
    fn new(concurrency: usize) -> Running<'a> {
        if concurrency == 1 {
            Running::One(None)
        } else {
            Running::Many(FuturesUnordered::new())
        }
    }

    fn len(&self) -> usize {
        match self {
            Running::One(slot) => usize::from(slot.is_some()),
            Running::Many(all) => all.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push(&mut self, dispatch: Dispatching<'a>) {
        match self {
            Running::One(slot) => {
                debug_assert!(slot.is_none(), "one dispatch at a time at concurrency 1");
                *slot = Some(dispatch);
            }
            Running::Many(all) => all.push(dispatch),
        }
    }

    /// The next dispatch to finish; `None` at once when none is running.
    fn next(&mut self) -> impl Future<Output = Option<std::thread::Result<Dispatched>>> + '_ {
        std::future::poll_fn(move |cx| match self {
            Running::One(slot) => match slot {
                None => Poll::Ready(None),
                Some(dispatch) => match dispatch.as_mut().poll(cx) {
                    Poll::Ready(done) => {
                        *slot = None;
                        Poll::Ready(Some(done))
                    }
                    Poll::Pending => Poll::Pending,
                },
            },
            Running::Many(all) => all.poll_next_unpin(cx),
        })
    }
}

/// Starts dispatching `delivery`: polled by the consume loop itself at concurrency 1 (no spawn
/// and no wake-up of another thread per message; a dispatch its first poll finishes is never
/// tracked). Above, it is first polled here too, while
/// [`Inline`] allows: a dispatch that finishes at once (a quick handler) never becomes a task,
/// and one that waits (on I/O, a timer) continues as a task of its own from where it stopped,
/// so waiting handlers overlap and run on every worker thread. Three first polls in a row that
/// took long (a CPU-bound handler) turn the inline polls off for the rest of the run: from
/// then on each dispatch is a task at once, and CPU-bound handlers run on every worker thread.
fn start<'a>(
    inner: &Arc<Inner>,
    delivery: Delivery,
    deadline: &watch::Receiver<bool>,
    gather: bool,
    inline: &mut Inline,
) -> Started<'a> {
    let deadline = Deadline::at(deadline.clone());
    let dispatch = std::panic::AssertUnwindSafe(inner.clone().dispatch(delivery, deadline, gather))
        .catch_unwind();
    let mut dispatch = Box::pin(dispatch);
    if inner.concurrency == 1 {
        // Never a task: what its first poll leaves pending, the loop polls on.
        return match dispatch.as_mut().now_or_never() {
            Some(done) => Started::Finished(done),
            None => Started::Running(dispatch),
        };
    }
    if inline.on {
        let timer = inline.timed().then(std::time::Instant::now);
        let done = dispatch.as_mut().now_or_never();
        if let Some(polled) = timer {
            inline.polled(polled.elapsed());
        }
        if let Some(done) = done {
            return Started::Finished(done);
        }
    }
    // A future polled once may move to a task: the task polls it at once, which registers
    // the task's waker wherever the first poll registered the loop's.
    let task = tokio::spawn(dispatch);
    Started::Running(Box::pin(async move {
        task.await.unwrap_or_else(|e| Err(Box::new(e.to_string())))
    }))
}

/// What [`start`] did with a delivery: finished it in its first poll (nothing is left to
/// track), or left a dispatch running.
enum Started<'a> {
    Finished(std::thread::Result<Dispatched>),
    Running(Dispatching<'a>),
}

/// Whether a new dispatch (above concurrency 1) is first polled by the consume loop: yes,
/// until [`Inline::IN_A_ROW`] timed first polls in a row each take longer than
/// [`Inline::BUDGET`].
///
/// Reading the clock twice per message cost a quick handler's loop about 2.5% of its time
/// (`perf`, concurrency 8, memory://), so one first poll in [`Inline::SAMPLE`] is timed; after
/// a long one, every poll is, until a quick one ends the streak. The first poll of a run is
/// timed, so a handler that computes every time is still caught in its first three messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Inline {
    on: bool,
    /// Long timed first polls since the last quick one.
    long: u8,
    /// First polls since the last timed one.
    untimed: u8,
}

impl Default for Inline {
    fn default() -> Inline {
        Inline {
            on: true,
            long: 0,
            untimed: 0,
        }
    }
}

impl Inline {
    /// A first poll longer than this is a handler that computes before it waits (or never
    /// waits): it should run beside the others, not on the consume loop.
    const BUDGET: Duration = Duration::from_micros(200);
    /// Long first polls in a row that turn the inline polls off. A handler that computes does
    /// so every time; one long poll among quick ones is the machine (the thread was
    /// preempted, a page fault), and turning the inline polls off for it would cost every
    /// later message a task for nothing.
    const IN_A_ROW: u8 = 3;
    /// One first poll in this many is timed while no long one is pending.
    const SAMPLE: u8 = 8;

    /// Whether the next first poll is timed: the first of every [`Inline::SAMPLE`], and every
    /// one while a streak of long polls is open.
    fn timed(&mut self) -> bool {
        if self.long > 0 {
            return true;
        }
        let timed = self.untimed == 0;
        self.untimed = (self.untimed + 1) % Inline::SAMPLE;
        timed
    }

    fn polled(&mut self, took: Duration) {
        if took > Inline::BUDGET {
            self.long += 1;
            if self.long >= Inline::IN_A_ROW {
                self.on = false;
            }
        } else {
            self.long = 0;
        }
    }
}

/// When the consume loop last saw work, for [`Consume::idle_timeout`]: a delivery settled, a
/// handler still running. A delivery of a message this run already gave back unchanged is not
/// work: under the `release` strategy an unknown URN comes straight back, and counting each
/// return would keep an idle worker alive for ever.
struct Idle {
    timeout: Option<Duration>,
    since: tokio::time::Instant,
    /// The messages given back unchanged so far ([`message_key`](super::dispatch::message_key)).
    released: std::collections::HashSet<u64>,
}

impl Idle {
    fn new(timeout: Option<Duration>) -> Idle {
        Idle {
            timeout,
            since: tokio::time::Instant::now(),
            released: std::collections::HashSet::new(),
        }
    }

    /// There is work now.
    fn busy(&mut self) {
        if self.timeout.is_some() {
            self.since = tokio::time::Instant::now();
        }
    }

    /// A delivery settled; `released` keys a message given back unchanged.
    fn settled(&mut self, released: Option<u64>) {
        if self.timeout.is_none() {
            return;
        }
        match released {
            Some(key) if !self.released.insert(key) => {}
            _ => self.busy(),
        }
    }

    /// Whether the loop has been idle for its timeout.
    fn expired(&self) -> bool {
        self.timeout.is_some_and(|t| self.since.elapsed() >= t)
    }
}

fn count(
    summary: &mut Summary,
    idle: &mut Idle,
    done: std::thread::Result<Dispatched>,
    gathered: &mut Vec<Delivery>,
) {
    let done = done.map(|dispatched| {
        gathered.extend(dispatched.ack);
        idle.settled(dispatched.released);
        dispatched.outcome
    });
    match done {
        Ok(Outcome::Interrupted) => summary.released_at_shutdown += 1,
        Ok(_) => summary.processed += 1,
        Err(payload) => {
            // The delivery was dropped unsettled: the broker brings it back.
            let panic = payload
                .downcast::<String>()
                .map(|text| *text)
                .or_else(|payload| payload.downcast::<&str>().map(|text| (*text).to_owned()))
                .unwrap_or_default();
            tracing::error!(target: LOG, panic = %panic, "A dispatch ended abnormally outside its handler; its message was left unsettled");
        }
    }
}

fn spawn_signal_listener(
    mut signals: Signals,
    stop: Arc<Stop>,
    signalled: Arc<AtomicBool>,
    deadline: Arc<watch::Sender<bool>>,
    shutdown_timeout: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if signals.next().await.is_err() {
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
        if signals.next().await.is_ok() {
            tracing::warn!(target: LOG, "Second signal: interrupting running handlers now");
            deadline.send_replace(true);
        }
        timer.abort();
    })
}

/// SIGTERM and SIGINT, each registered with the process when this is created (so from then on
/// neither ends the process by default), and read one at a time by the listener.
#[cfg(unix)]
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn listen() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) -> std::io::Result<()> {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        Ok(())
    }
}

/// Ctrl-C, listened to from the listener's first poll.
#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn listen() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    async fn next(&mut self) -> std::io::Result<()> {
        tokio::signal::ctrl_c().await
    }
}
