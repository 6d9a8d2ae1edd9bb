//! One consume run: the state of [`App::consume`](crate::app::App::consume)'s loop, and one
//! method per step of it, so the loop reads as the sequence it is.
//!
//! Each turn: count the dispatches that finished; stop when asked to, or idle; start a held
//! delivery while a handler slot is free; else ask the broker for as many deliveries as there is
//! room for, and act on its answer (deliveries, nothing, an error). At the end, [`Run::drain`]
//! gives back what was received and not started and lets the running handlers finish.

use std::collections::VecDeque;
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::FutureExt as _;
use tokio::sync::watch;

use super::running::{Inline, Running, Started, launch};
use super::tally::Tally;
use super::{Consume, Summary};
use crate::app::{App, Inner, LOG};
use crate::error::{TransportError, TransportErrorKind};
use crate::transport::{Capabilities, Delivery};

/// Acknowledgements gathered before they are sent together, at least.
const ACK_BATCH: usize = 64;

/// A receive in flight.
type Receiving<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<Vec<Delivery>, TransportError>> + Send + 'a>>;

/// What a receive brought.
type Received = std::result::Result<Vec<Delivery>, TransportError>;

/// The consume loop's state, for one run.
pub(super) struct Run<'a> {
    inner: &'a Arc<Inner>,
    queue: &'a str,
    capabilities: Capabilities<'a>,
    max_messages: Option<u64>,
    /// Whether a poll that finds the queue empty ends the run: `max_messages` without an idle
    /// timeout.
    stop_when_empty: bool,
    /// The app, shared by the run's dispatches (their handlers' contexts publish through it):
    /// made once for the run.
    app: Arc<App>,
    /// Fires at the shutdown deadline.
    deadline: watch::Receiver<bool>,
    /// Whether plain acknowledgements are gathered for a `BatchAcker`.
    gather: bool,
    /// A full batch of gathered acknowledgements.
    ack_batch: usize,
    /// Received and not started yet (at most `prefetch` held with those running).
    ready: VecDeque<Delivery>,
    /// The dispatches in flight: polled by this task at concurrency 1, a task each above.
    running: Running<'a>,
    /// Above concurrency 1: whether a new dispatch is first polled here (see [`launch`]).
    inline: Inline,
    /// A receive in progress. It is never cancelled (a reserved delivery would be stranded):
    /// when a dispatch finishes first, the receive stays pending for the next turn.
    receiving: Option<Receiving<'a>>,
    /// When the receive in progress first had to wait (unset while it answered at once: the
    /// clock is read only on the way to a wait).
    receive_waited: Option<tokio::time::Instant>,
    /// Whether the last dispatch started finished at its first poll: with a per-slot prefetch
    /// from the transport, deliveries beyond the free slots are asked for only then (a handler
    /// that waits would leave them waiting behind it, their locks running).
    quick: bool,
    tally: Tally,
    /// A receive error that polling again cannot heal; the run ends with it.
    fatal: Option<TransportError>,
}

impl<'a> Run<'a> {
    pub(super) fn new(
        app: &'a App,
        queue: &'a str,
        options: &Consume,
        deadline: watch::Receiver<bool>,
    ) -> Run<'a> {
        let inner = &app.inner;
        let capabilities = inner.transport.capabilities();
        Run {
            inner,
            queue,
            capabilities,
            max_messages: options.max_messages,
            stop_when_empty: options.max_messages.is_some() && options.idle_timeout.is_none(),
            app: Arc::new(app.clone()),
            deadline,
            gather: capabilities.batch_acker().is_some(),
            ack_batch: inner.prefetch.max(ACK_BATCH),
            ready: VecDeque::new(),
            running: Running::new(inner.concurrency),
            inline: Inline::default(),
            receiving: None,
            receive_waited: None,
            quick: false,
            tally: Tally::new(options.idle_timeout),
            fatal: None,
        }
    }

    /// The loop, until a stop, the idle timeout, `max_messages`, or a fatal receive error.
    pub(super) async fn run(&mut self) {
        loop {
            self.count_finished();
            if self.tally.gathered.len() >= self.ack_batch {
                self.inner.ack_gathered(&mut self.tally.gathered).await;
            }
            if self.stopping() {
                break;
            }
            // Deliveries keep coming, but each is a message this run already gave back
            // unchanged (an unknown URN under the `release` strategy): that is no work.
            if self.holds_nothing() && self.tally.idle.expired() {
                break;
            }
            if let Some(delivery) = self.next_to_start() {
                self.start(delivery);
                continue;
            }
            let wanted = self.wanted();
            if self.receiving.is_none() && wanted == 0 {
                if self.holds_nothing() {
                    break; // max_messages reached and settled
                }
                self.wait_for_room().await;
                continue;
            }
            let Some(received) = self.receive(wanted).await else {
                continue; // a dispatch finished first; the receive stays pending
            };
            let next = match received {
                Ok(deliveries) if !deliveries.is_empty() => self.on_received(deliveries),
                Ok(_) => self.on_empty().await,
                Err(e) => self.on_error(e).await,
            };
            if next.is_break() {
                break;
            }
        }
    }

    fn stopping(&self) -> bool {
        self.inner.stop.flag.load(Ordering::SeqCst)
    }

    /// Nothing running and nothing received waiting to start.
    fn holds_nothing(&self) -> bool {
        self.running.is_empty() && self.ready.is_empty()
    }

    /// Counts the dispatches that finished since the last turn.
    fn count_finished(&mut self) {
        while let Some(Some(done)) = self.running.next().now_or_never() {
            self.tally.count(done);
        }
    }

    /// The oldest delivery held, when a handler slot is free for it.
    fn next_to_start(&mut self) -> Option<Delivery> {
        if self.running.len() < self.inner.concurrency {
            self.ready.pop_front()
        } else {
            None
        }
    }

    /// Starts `delivery`'s dispatch, unless the broker took it back while it waited.
    fn start(&mut self, delivery: Delivery) {
        // Taken back by the broker while it waited (its channel closed): the broker hands it
        // out again, so it is not handled here as well.
        if let Some(check) = self.capabilities.hold_checker()
            && !check.still_held(&delivery)
        {
            tracing::debug!(target: LOG, queue = %self.queue, "A received delivery was taken back by the broker before it started; not handled here");
            return;
        }
        let started = launch(
            &self.app,
            delivery,
            &self.deadline,
            self.gather,
            &mut self.inline,
        );
        match started {
            Started::Finished(done) => {
                self.quick = true;
                self.tally.count(done);
            }
            Started::Running(dispatch) => {
                self.quick = false;
                self.running.push(dispatch);
            }
        }
    }

    /// How many deliveries to ask for: the room left (`prefetch`, or `concurrency` while
    /// handlers wait under a transport's per-slot prefetch) less those held, and no more than
    /// `max_messages` still allows.
    fn wanted(&self) -> usize {
        let held = self.running.len() + self.ready.len();
        let started = self.tally.summary.processed + held as u64;
        let room = if self.inner.prefetch_follows_handlers && !self.quick {
            self.inner.concurrency
        } else {
            self.inner.prefetch
        };
        self.max_messages
            .map_or(usize::MAX, |max| {
                usize::try_from(max.saturating_sub(started)).unwrap_or(usize::MAX)
            })
            .min(room.saturating_sub(held))
    }

    /// No room for another delivery: sends what was gathered, then waits for a dispatch to
    /// finish or a stop.
    async fn wait_for_room(&mut self) {
        self.inner.ack_gathered(&mut self.tally.gathered).await;
        tokio::select! {
            done = self.running.next() => if let Some(done) = done { self.tally.count(done) },
            () = self.inner.stop.notify.notified() => {}
        }
    }

    /// Asks the broker for up to `wanted` deliveries, or goes on with the receive in progress.
    /// `None` when a dispatch finished first: the receive is kept for the next turn.
    async fn receive(&mut self, wanted: usize) -> Option<Received> {
        let inner = self.inner;
        if self.receiving.is_none() {
            // Before asking the broker for more, it hears what was handled: a broker that
            // orders by group (SQS FIFO) holds the next messages back while one is unsettled.
            inner.ack_gathered(&mut self.tally.gathered).await;
        }
        let queue = self.queue;
        let waited = &mut self.receive_waited;
        let receive = self.receiving.get_or_insert_with(|| {
            *waited = None;
            // Already a pinned box (an `async_trait` method): not boxed a second time.
            inner.transport.receive(queue, wanted, inner.poll_timeout)
        });
        let received = match receive.as_mut().now_or_never() {
            Some(received) => received,
            None => {
                self.receive_waited
                    .get_or_insert_with(tokio::time::Instant::now);
                // About to wait: nothing gathered is held back meanwhile.
                inner.ack_gathered(&mut self.tally.gathered).await;
                if self.running.is_empty() {
                    receive.await
                } else {
                    tokio::select! {
                        biased;
                        done = self.running.next() => {
                            if let Some(done) = done {
                                self.tally.count(done);
                            }
                            return None;
                        }
                        received = receive => received,
                    }
                }
            }
        };
        self.receiving = None;
        Some(received)
    }

    /// Deliveries arrived: they wait for a handler slot.
    fn on_received(&mut self, deliveries: Vec<Delivery>) -> ControlFlow<()> {
        self.ready.extend(deliveries);
        if self.stopping() {
            // Reserved after the stop was requested: handed straight back by `drain`.
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// The queue was empty: the run may end (`max_messages` without an idle timeout, or idle
    /// for its timeout); else the loop waits out the rest of the poll timeout.
    async fn on_empty(&mut self) -> ControlFlow<()> {
        if self.holds_nothing() {
            if self.stop_when_empty || self.tally.idle.expired() {
                return ControlFlow::Break(());
            }
        } else {
            self.tally.idle.busy();
        }
        // A transport may answer an empty receive before the poll timeout (a short poll, an
        // in-memory fake): wait out the rest, so that the loop never spins on a queue that
        // stays empty (it would starve the runtime's other tasks, timers included). A stop or a
        // finished dispatch ends the wait early.
        let rest = self.inner.poll_timeout.saturating_sub(
            self.receive_waited
                .map_or(Duration::ZERO, |since| since.elapsed()),
        );
        if !rest.is_zero() {
            self.inner.ack_gathered(&mut self.tally.gathered).await;
            tokio::select! {
                () = tokio::time::sleep(rest) => {}
                () = self.inner.stop.notify.notified() => {}
                done = self.running.next(), if !self.running.is_empty() => {
                    if let Some(done) = done {
                        self.tally.count(done);
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// The receive failed: wrong credentials or a configuration the client refuses end the
    /// run; anything else pauses the loop (the dispatches in flight go on) before it polls
    /// again.
    async fn on_error(&mut self, e: TransportError) -> ControlFlow<()> {
        let queue = self.queue;
        if matches!(
            e.kind(),
            TransportErrorKind::Auth | TransportErrorKind::Config
        ) {
            // Wrong credentials, or a consumer its client gave up on (a configuration it
            // refuses, a fenced static member), do not heal by polling again: stop, and say
            // why.
            tracing::error!(target: LOG, queue = %queue, error = %e, "Receiving from {queue:?} cannot work ({:?}); stopping", e.kind());
            self.fatal = Some(e);
            return ControlFlow::Break(());
        }
        tracing::error!(target: LOG, queue = %queue, error = %e, "Receiving from queue {queue:?} failed; retrying");
        self.inner.ack_gathered(&mut self.tally.gathered).await;
        let pause = self.inner.pause(if e.is_transient() {
            self.inner.poll_timeout
        } else {
            self.inner.rewind_pause
        });
        tokio::pin!(pause);
        loop {
            tokio::select! {
                () = &mut pause => break,
                done = self.running.next(), if !self.running.is_empty() => {
                    if let Some(done) = done {
                        self.tally.count(done);
                    }
                }
            }
        }
        // Nothing arrives while the broker fails: that time counts towards the idle timeout
        // too.
        if self.running.is_empty() && self.tally.idle.expired() {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// The end of the run: a receive still in progress is finished, never dropped, and what it
    /// reserved goes back with every delivery received and not started; the running handlers
    /// finish and settle; the gathered acknowledgements are sent. Returns the summary and the
    /// error that ended the run, if one did.
    pub(super) async fn drain(mut self) -> (Summary, Option<TransportError>) {
        if let Some(receive) = self.receiving.take() {
            let running = &mut self.running;
            let tally = &mut self.tally;
            let (received, ()) = tokio::join!(receive, async {
                while let Some(done) = running.next().await {
                    tally.count(done);
                }
            });
            if let Ok(deliveries) = received {
                self.ready.extend(deliveries);
            }
        }
        for delivery in self.ready.drain(..) {
            self.inner.release_unprocessed(&delivery).await;
            self.tally.summary.released_at_shutdown += 1;
        }
        while let Some(done) = self.running.next().await {
            self.tally.count(done);
        }
        self.inner.ack_gathered(&mut self.tally.gathered).await;
        (self.tally.summary, self.fatal)
    }
}
