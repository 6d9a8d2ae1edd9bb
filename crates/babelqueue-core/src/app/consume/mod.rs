//! The consume loop: up to `concurrency` deliveries at once, and the graceful shutdown.
//!
//! * here: the options, the summary, the stop handle, and [`App::consume`], which prepares a
//!   run, runs it and closes it;
//! * `run`: the loop's state and its steps (receive, start, count, drain);
//! * `running`: the dispatches in flight, and how one starts;
//! * `tally`: what the loop counts as dispatches finish, and when it last saw work;
//! * `signals`: SIGTERM/SIGINT and the shutdown deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::{App, LOG};
use crate::error::Result;
use crate::transport::{Capabilities, Redelivery};

mod run;
mod running;
mod signals;
mod tally;

use run::Run;
use signals::{Signals, spawn_signal_listener};

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
        self.warn_unhonoured(inner.transport.capabilities());
        self.prepare(&queue).await?;
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

        let mut run = Run::new(self, &queue, &options, deadline_rx);
        run.run().await;
        let (mut summary, fatal) = run.drain().await;

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

    /// Warns about a configuration the transport cannot honour: retries it cannot redeliver, a
    /// back-off it cannot delay.
    fn warn_unhonoured(&self, capabilities: Capabilities<'_>) {
        let inner = &self.inner;
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
    }

    /// Lets the transport size itself for the run's prefetch
    /// ([`Transport::prepare_consume`](crate::Transport::prepare_consume)).
    async fn prepare(&self, queue: &str) -> Result<()> {
        let inner = &self.inner;
        match inner.transport.prepare_consume(queue, inner.prefetch).await {
            Ok(()) => Ok(()),
            // A broker that is down now may be back by the first poll; the loop retries.
            Err(e) if e.is_transient() => {
                tracing::warn!(target: LOG, queue = %queue, error = %e, "Preparing to consume {queue:?} failed; polling anyway");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}
